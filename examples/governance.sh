#!/usr/bin/env bash
# A campaign from contract to stop, using only the CLI: a curator writes the contract from a
# prompt (with a budget of two experiments) and amends it, a proposer proposes a hypothesis, an
# executor proposes actions, the owner approves one and refuses to approve a denied tool, the
# executor records what came of it with its usage, findings and evidence packet, the evaluator
# judges the evidence and retires the hypothesis (one decision, one iteration), and once the
# experiments budget is spent should-run holds everyone back and `loopx campaign evaluate` stops
# the campaign (budget_exhausted:experiments).
# Uses $LOOPX, else `loopx` on PATH. Works in a new temporary directory; tokens live in files.
set -euo pipefail

source "$(cd "$(dirname "$0")" && pwd)/lib.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/loopx-governance.XXXXXX")"
cd "$work"

# -- the workspace and four agents (the owner token registers them) ----------------------------
step init --goal-id mnist-width --owner-token-file owner.token
for agent in "cur research_curator" "prop hypothesis_proposer" "ex research_executor" \
             "ev evaluator_promoter"; do
    set -- $agent
    step agent register --agent-id "$1" --role "$2" --token-file owner.token --out-token-file "$1.token"
done
step campaign status

# -- the contract: from a prompt, with a budget and a stop policy; contract init plans the campaign
step contract init --agent-id cur --token-file cur.token \
    --prompt "Does a wider hidden layer raise MNIST accuracy? The test split stays untouched." \
    --domain vision --metric accuracy --direction maximize --baseline 0.97 --seeds 0,1,2 \
    --protected eval/ --budget experiments=2 --budget gpu_hours=4 \
    --set stop_policy.max_iterations=10 --set stop_policy.patience_iterations=3 \
    --allow-tool 'lab.*' --allow-tool 'loopx.*' --deny-tool lab.delete_data \
    --tool-risk lab.train=compute --tool-risk lab.fetch=external
step contract amend --agent-id cur --token-file cur.token \
    --reason "a run takes up to 3 GPU hours" --set budget.max_gpu_hours=6
step contract show

# -- ready, then the first claim makes the campaign running ----------------------------------
step campaign transition ready --reason "contract reviewed" --agent-id cur --token-file cur.token
cat > todos.json <<'EOF'
[{"todo_id": "propose-w128", "title": "Propose the width-128 hypothesis",
  "role": "hypothesis_proposer", "action_kind": "propose_hypothesis"},
 {"todo_id": "dev-w128", "title": "Dev eval: hidden width 128", "role": "research_executor",
  "action_kind": "run_dev_eval", "hypothesis_id": "h-w128", "estimated_cost": {"experiments": 1}},
 {"todo_id": "sweep", "title": "Sweep five widths", "role": "research_executor",
  "action_kind": "run_dev_eval", "hypothesis_id": "h-sweep", "priority": 9,
  "estimated_cost": {"experiments": 5}}]
EOF
step todo add --file todos.json --agent-id owner --token-file owner.token
step quota should-run --agent-id prop --token-file prop.token --claim
step hypothesis propose --agent-id prop --token-file prop.token --under propose-w128:1 \
    --hypothesis-id h-w128 --title "width 128" \
    --statement "A hidden width of 128 raises MNIST accuracy above the 0.97 baseline" \
    --mechanism width --param width=128 --no-grounding-reason "the campaign's question"
step todo complete propose-w128 --epoch 1 --result '{"hypotheses": ["h-w128"]}' \
    --agent-id prop --token-file prop.token
# "sweep" has the higher priority but would cost more than the budget has left: passed over.
step quota should-run --agent-id ex --token-file ex.token --claim
step campaign status

# -- proposals: eligibility and approval are separate --------------------------------------------
step propose --agent-id ex --token-file ex.token --proposal-id p-train-128 \
    --name "train width 128" --tool lab.train --risk compute \
    --reason "dev evaluation of width 128" --args '{"width": 128, "epochs": 5}' \
    --cost experiments=1 --cost gpu_hours=1
step propose --agent-id ex --token-file ex.token --proposal-id p-clean \
    --name "free disk space" --tool lab.delete_data --risk destructive --reason "disk is full"
step propose --agent-id ex --token-file ex.token --name "fetch weights" --tool lab.fetch \
    --risk external --reason "a pretrained start" --args '{"api_key": "hunter2hunter2"}' \
    || echo "(exit status $?)"
# While its action awaits approval, the executor is told to wait.
step quota should-run --agent-id ex --json
step approvals
step can-execute p-train-128 || echo "(exit status $?)"
step approve p-clean --note "fine by me" --token-file owner.token || echo "(exit status $?)"
step approve p-train-128 --note "one run fits the budget" --approver Dana --token-file owner.token
step can-execute p-train-128 --json

# -- the executor runs the tool itself, then records what came of it and what it cost ---------
step action record p-train-128 --success --result '{"dev_accuracy": [0.962, 0.958, 0.960]}' \
    --usage experiments=1 --usage gpu_hours=0.8 --agent-id ex --token-file ex.token
result_id="$("$LOOPX" action show p-train-128 --json | field result.record_id)"
step action show p-train-128
step finding add --agent-id ex --token-file ex.token --finding-id f-dev-128 \
    --kind computed_result --statement "width 128: mean dev accuracy 0.960 over seeds 0, 1, 2" \
    --evidence "record:$result_id" --confidence medium
step finding add --agent-id ex --token-file ex.token --finding-id f-wider \
    --kind hypothesis --statement "width 256 would not help either"
step finding list
# What the evaluator judges is the evidence packet: one value per contract seed.
cat > packet.json <<'EOF'
{"hypothesis_id": "h-w128", "status": "scored",
 "results": [{"split": "dev", "metric": "accuracy", "seed": 0, "value": 0.962},
             {"split": "dev", "metric": "accuracy", "seed": 1, "value": 0.958},
             {"split": "dev", "metric": "accuracy", "seed": 2, "value": 0.960}]}
EOF
printf '\n$ cat packet.json\n'; cat packet.json
step evidence append-packet packet.json --under dev-w128:1 --agent-id ex --token-file ex.token
step todo complete dev-w128 --epoch 1 --result '{"status": "scored", "dev": {"verdict": "contradicts"}}' \
    --agent-id ex --token-file ex.token
# One experiment is left; "sweep" would cost five, so should-run passes it over.
step quota should-run --agent-id ex --json

# -- one decision is one iteration (the stop policy is evaluated in the same locked step) -------
step quota should-run --agent-id ev --token-file ev.token --claim
step evidence judge h-w128 --split dev --agent-id ev --token-file ev.token
step todo complete dev-w128.judge_dev_attempt --epoch 1 --result '{"verdict": "contradicts"}' \
    --agent-id ev --token-file ev.token
step candidates
step decide retire h-w128 --reason contradicted --decision-id d-w128 --agent-id ev --token-file ev.token

# -- the second experiment spends the budget ------------------------------------------------------
step usage add --experiments 1 --gpu-hours 0.7 --note "width 128, a second run" --agent-id ex --token-file ex.token
step usage show
step quota should-run --agent-id ex --json
step campaign evaluate --dry-run
step campaign evaluate --agent-id ev --token-file ev.token --json
step campaign status
step quota should-run --agent-id ex --json
step campaign transition running --reason "one more" --agent-id owner --token-file owner.token \
    || echo "(exit status $?)"
step verify
echo
echo "workspace left in $work"
