#!/usr/bin/env bash
# Two hypotheses through the research loop, using only the CLI and git. A curator writes a
# contract whose protected scope is eval/ and whose held-out data has a location; a proposer
# proposes two widths; an executor evaluates them on their own git branches; an evaluator judges
# the evidence, checks the protected boundary from git and decides.
#   h-w128 is honest: dev supports, a dev-only promotion is refused, the held-out todo (from the
#   evaluator's successor rule, which reads its judgement in the log) carries the held-out
#   location, held-out supports, the gate passes, and it is promoted: each step a todo the
#   evaluator's rules add.
#   h-w256 edits eval/score.py while its packet says "protected_scope_clean": true: the gate,
#   which reads git and not the flag, fails, and it is retired for guardrail_failed.
# Then a duplicate of the retired idea and a second held-out read are refused, and each refusal
# is recorded in the log. Last, a narrator publishes the story (its new first screen held back
# until the owner approves a preview) and the board, and verify checks the log against the
# story's anchor. Uses $LOOPX, else `loopx` on PATH; needs git. Works in a new temporary
# directory; tokens live in files.
set -euo pipefail

source "$(cd "$(dirname "$0")" && pwd)/lib.sh"
command -v git >/dev/null || { echo "no git on PATH" >&2; exit 2; }

# Commits need an identity; these keep the example independent of any git configuration.
export GIT_AUTHOR_NAME="Example Executor" GIT_AUTHOR_EMAIL="executor@example.invalid"
export GIT_COMMITTER_NAME="Example Executor" GIT_COMMITTER_EMAIL="executor@example.invalid"
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1

work="$(mktemp -d "${TMPDIR:-/tmp}/loopx-research.XXXXXX")"
cd "$work"

# packet FILE HYPOTHESIS SPLIT BASE EVALUATED V0 V1 V2: an executor's scored packet, three seeds.
packet() {
    python3 - "$@" <<'EOF'
import json, sys
path, hypothesis, split, base, evaluated, *values = sys.argv[1:]
head = {"hypothesis_id": hypothesis, "status": "scored", "branch": hypothesis,
        "base_commit": base, "evaluated_commit": evaluated, "protected_scope_clean": True}
rows = [json.dumps({"split": split, "metric": "accuracy", "seed": seed, "value": float(v)})
        for seed, v in enumerate(values)]
with open(path, "w") as out:
    out.write("{" + ",\n ".join(json.dumps(k) + ": " + json.dumps(v) for k, v in head.items())
              + ',\n "results": [' + ",\n             ".join(rows) + "]}\n")
EOF
}

# -- a git repository: the model may change, the evaluator under eval/ may not ------------------
git init -q -b main
printf '.loopx/\n*.token\n' > .gitignore
mkdir eval
printf 'def score(predictions, labels):\n    return (predictions == labels).mean()\n' > eval/score.py
printf 'WIDTH = 64\n' > model.py
git add -A && git commit -qm "baseline: width 64"
base="$(git rev-parse HEAD)"

# -- the workspace, four agents and the contract ------------------------------------------------
step init --goal-id mnist-width --owner-token-file owner.token
for agent in "cur research_curator" "prop hypothesis_proposer" "ex research_executor" \
             "ev evaluator_promoter"; do
    set -- $agent
    "$LOOPX" agent register --agent-id "$1" --role "$2" --token-file owner.token \
        --out-token-file "$1.token" >/dev/null
    echo "(registered $1 as $2)"
done
step contract init --agent-id cur --token-file cur.token \
    --prompt "Does a wider hidden layer raise MNIST accuracy?" --domain vision \
    --metric accuracy --direction maximize --baseline 0.97 --seeds 0,1,2 \
    --set 'protected_scope=["eval/"]' --set "protected_commit=$base" --base-commit "$base" \
    --set evaluation.heldout.location=/data/mnist/heldout
# The evaluator in the baseline commit is the real one: every evaluated commit must hold it.
# Every experiment starts from that commit too: pinned, so no executor's packet chooses it.
# The held-out location is withheld from `contract show`; only a held-out todo's claim gets it.
printf '\n$ loopx contract show --json   (evaluation.heldout only)\n'
"$LOOPX" contract show --json | field contract.evaluation.heldout
step campaign transition ready --reason "contract reviewed" --agent-id cur --token-file cur.token

# -- the proposer: two hypotheses, each with a dev todo for the executors -----------------------
step todo add --agent-id owner --token-file owner.token --todo-id propose-widths \
    --title "Propose width hypotheses" --role hypothesis_proposer --action propose_hypothesis
step quota should-run --agent-id prop --token-file prop.token --claim
step hypothesis propose --agent-id prop --token-file prop.token --under propose-widths:1 \
    --hypothesis-id h-w128 --title "width 128" \
    --statement "A hidden width of 128 raises accuracy over width 64" --mechanism width \
    --param width=128 --no-grounding-reason "first idea of the campaign" --dev-todo dev-w128
step hypothesis propose --agent-id prop --token-file prop.token --under propose-widths:1 \
    --hypothesis-id h-w256 --title "width 256" \
    --statement "A hidden width of 256 raises accuracy over width 64" --mechanism width \
    --param width=256 --no-grounding-reason "first idea of the campaign" --dev-todo dev-w256
step todo complete propose-widths --epoch 1 --result '{"hypotheses": ["h-w128", "h-w256"]}' \
    --agent-id prop --token-file prop.token
step frontier

# -- h-w128 on dev: the executor changes model.py only ------------------------------------------
step quota should-run --agent-id ex --token-file ex.token --claim
run git checkout -q -b h-w128 "$base"
printf 'WIDTH = 128\n' > model.py
run git commit -q -am "width 128"
w128="$(git rev-parse HEAD)"
run git checkout -q main
packet dev-w128.json h-w128 dev "$base" "$w128" 0.981 0.979 0.983
printf '\n$ cat dev-w128.json\n'; cat dev-w128.json
step evidence append-packet dev-w128.json --under dev-w128:1 --agent-id ex --token-file ex.token
# Successor rules read the log, not the result: the scored packet under the todo makes a judge
# todo, whatever the executor says of its own numbers.
step todo complete dev-w128 --epoch 1 --result '{"status": "scored"}' --agent-id ex --token-file ex.token
step quota should-run --agent-id ev --token-file ev.token --claim
step evidence judge h-w128 --split dev --agent-id ev --token-file ev.token
# The judgement in the log supports h-w128 and it has no held-out packet: the evaluator's rule
# adds the held-out todo (and a refinement todo for the proposer).
step todo complete dev-w128.judge_dev_attempt --epoch 1 --agent-id ev --token-file ev.token
# Dev supports, but dev-only lift never promotes: refused, and the refusal is recorded.
step decide promote h-w128 --agent-id ev --token-file ev.token || echo "(exit status $?)"

# -- h-w256 on dev: the executor also edits the protected evaluator, and says it did not --------
step quota should-run --agent-id ex --token-file ex.token --claim
run git checkout -q -b h-w256 "$base"
printf 'WIDTH = 256\n' > model.py
printf 'def score(predictions, labels):\n    return 1.0\n' > eval/score.py
run git commit -q -am "width 256"
w256="$(git rev-parse HEAD)"
run git diff --stat "$base" "$w256"
run git checkout -q main
packet dev-w256.json h-w256 dev "$base" "$w256" 0.995 0.996 0.994
printf '\n$ grep protected_scope_clean dev-w256.json\n'; grep protected_scope_clean dev-w256.json
step evidence append-packet dev-w256.json --under dev-w256:1 --agent-id ex --token-file ex.token
step todo complete dev-w256 --epoch 1 --result '{"status": "scored"}' --agent-id ex --token-file ex.token
step quota should-run --agent-id ev --token-file ev.token --claim
step evidence judge h-w256 --split dev --agent-id ev --token-file ev.token
# The gate reads the commits between base_commit and evaluated_commit from git.
step gate check h-w256 --agent-id ev --token-file ev.token
# Dev supports it too, but the failed gate makes it a retirement candidate: no held-out read is
# spent on it, and the same evaluator gets the decision todo.
step todo complete dev-w256.judge_dev_attempt --epoch 1 --agent-id ev --token-file ev.token
step frontier --agent-id ev
step candidates

# -- h-w128 on held-out: the successor todo's claim packet carries the held-out location -------
printf '\n$ loopx quota should-run --agent-id ex --token-file ex.token --claim --json   (todo and claim.data)\n'
answer="$("$LOOPX" quota should-run --agent-id ex --token-file ex.token --claim --json)"
echo "$answer" | field todo.todo_id
echo "$answer" | field claim.data
heldout_todo=dev-w128.judge_dev_attempt.heldout_after_supported_dev
packet heldout-w128.json h-w128 heldout "$base" "$w128" 0.978 0.980 0.977
step evidence append-packet heldout-w128.json --under "$heldout_todo:1" \
    --agent-id ex --token-file ex.token
# -- refused, and recorded: a second measurement under the same held-out claim ------------------
# One held-out claim admits one held-out packet: measuring again until a test passes is refused.
packet heldout-w128-b.json h-w128 heldout "$base" "$w128" 0.990 0.991 0.989
step evidence append-packet heldout-w128-b.json --under "$heldout_todo:1" \
    --agent-id ex --token-file ex.token || echo "(exit status $?)"
step todo complete "$heldout_todo" --epoch 1 --result '{"status": "scored"}' \
    --agent-id ex --token-file ex.token

# -- refused, and recorded: a second held-out read ----------------------------------------------
# h-w128 has read the held-out data once, its budget: should-run passes over a second read ...
step todo add --agent-id ev --token-file ev.token --todo-id heldout-w128-again \
    --title "Held-out evaluation of width 128, again" --role research_executor \
    --action run_holdout_eval --hypothesis h-w128
step quota should-run --agent-id ex --json
# ... and a claim of it is refused (the read budget is checked before the successors-only rule).
step todo claim heldout-w128-again --agent-id ex --token-file ex.token || echo "(exit status $?)"

# -- the evaluator follows its chain: each step is the todo should-run hands it -----------------
# First the decision on h-w256 (assigned to this evaluator, so selected first).
step quota should-run --agent-id ev --token-file ev.token --claim
step decide retire h-w256 --reason guardrail_failed --agent-id ev --token-file ev.token
step todo complete dev-w256.judge_dev_attempt.decide_after_judgement --epoch 1 \
    --agent-id ev --token-file ev.token
# Then the held-out judgement of h-w128.
step quota should-run --agent-id ev --token-file ev.token --claim
step evidence judge h-w128 --split heldout --agent-id ev --token-file ev.token
# -- refused, and recorded: judging held-out again ---------------------------------------------
# The first held-out judgement of a hypothesis is final.
step evidence judge h-w128 --split heldout --agent-id ev --token-file ev.token || echo "(exit status $?)"
# Held-out supports, and the protected boundary is not checked yet: a gate-check todo follows.
step todo complete "$heldout_todo.judge_heldout_attempt" --epoch 1 \
    --agent-id ev --token-file ev.token
step frontier --agent-id ev
step candidates
step quota should-run --agent-id ev --token-file ev.token --claim
step gate check h-w128 --agent-id ev --token-file ev.token
# The gate passed: a promotion candidate, so a decision todo follows.
step todo complete "$heldout_todo.judge_heldout_attempt.gate_check_after_supported_heldout" \
    --epoch 1 --agent-id ev --token-file ev.token
step candidates
step quota should-run --agent-id ev --token-file ev.token --claim
step decide promote h-w128 --agent-id ev --token-file ev.token
answer="$("$LOOPX" quota should-run --agent-id ev --json)"
step todo complete "$(echo "$answer" | field todo.todo_id | tr -d '"')" --epoch 1 \
    --agent-id ev --token-file ev.token

# -- refused, and recorded: a duplicate of the retired idea -------------------------------------
step todo add --agent-id owner --token-file owner.token --todo-id propose-more \
    --title "Propose more width hypotheses" --role hypothesis_proposer --action propose_hypothesis
# (should-run would hand the proposer the refinement todo of h-w128 first; it takes this one.)
step todo claim propose-more --agent-id prop --token-file prop.token
# Same mechanism family and parameters (written otherwise), the statement reworded: the
# statement is not part of an idea's fingerprint.
step hypothesis propose --agent-id prop --token-file prop.token --under propose-more:1 \
    --hypothesis-id h-w256-again --title "width 256, again" \
    --statement "Widening the hidden layer to 256 units lifts accuracy" --mechanism Width \
    --param width=256.0 --no-grounding-reason "worth another try" || echo "(exit status $?)"
step todo complete propose-more --epoch 1 --result '{"hypotheses": []}' \
    --agent-id prop --token-file prop.token

# -- the projections, the audit trail, and verify -----------------------------------------------
step frontier
step frontier --agent-id ev
printf '\n$ loopx graph --json | head -c 600\n'
"$LOOPX" graph --json | head -c 600
echo
step graph
step log --kind research_refusal_v0
printf '\n$ loopx log --kind research_refusal_v0 --json   (seq, rule, requested_kind)\n'
"$LOOPX" log --kind research_refusal_v0 --json | python3 -c 'import json,sys
for line in sys.stdin:
    r = json.loads(line); p = r["payload"]
    print(r["seq"], p["rule"], p["requested_kind"], p["requested_action"], p["hypothesis_id"])'
step campaign status

# -- the narrator: the public story, its first screen, the board, and the anchor ----------------
"$LOOPX" agent register --agent-id narr --role product_narrator --token-file owner.token \
    --out-token-file narr.token >/dev/null
echo "(registered narr as product_narrator)"
# The story's first screen would now announce the promotion: without an approved preview that
# change is held back, and the neutral first screen is published.
step story --out story.md --agent-id narr --token-file narr.token
step preview --preview-id preview-1 --agent-id narr --token-file narr.token
step approvals
step approve preview-1 --note "headline checked against the held-out judgement" \
    --token-file owner.token
step story --out story.md --agent-id narr --token-file narr.token
step board --out board.html --agent-id narr --token-file narr.token
run head -n 7 story.md
# The story quotes the head it was rendered from: an anchor for verify.
anchor="$(grep -o 'verify --expect [0-9]*:[0-9a-f]*' story.md | head -n 1 | cut -d' ' -f3)"
step verify --expect "$anchor"
echo
echo "workspace left in $work"
