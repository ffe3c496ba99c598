#!/usr/bin/env bash
# A walk-through of the evidence log: init (owner token), register two agents, a contract, a todo
# the owner adds and the proposer claims, an atomic batch tied to that todo, its completion, then
# log, show, verify, and what verify says about a tampered copy. Needs `loopx` on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/loopx-walkthrough.XXXXXX")"
cd "$work"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

# seq 1: the workspace record; seq 2-6: the five role profiles
step loopx init --goal-id digits-demo --owner-token-file owner.token
# The owner registers a curator; its token goes to a private file, never into the log (seq 7).
step loopx agent register --agent-id curator-1 --role research_curator --token-file owner.token --out-token-file curator.token
# A contract is not tied to a todo: the curator's token is all it needs (seq 8).
step loopx append --kind research_contract_v0 --file "$here/drafts/contract.json" --agent-id curator-1 --token-file curator.token
# The owner registers a proposer and adds a todo for it (seq 9-10) ...
step loopx agent register --agent-id proposer-1 --role hypothesis_proposer --token-file owner.token --out-token-file proposer.token
step loopx todo add --agent-id owner --token-file owner.token --todo-id todo-propose-digits --title "Propose a first hypothesis for the digits contract" --role hypothesis_proposer --action propose_hypothesis --assign proposer-1
# ... which the proposer claims, taking epoch 1 of its lease (seq 11).
step loopx quota should-run --agent-id proposer-1 --token-file proposer.token --claim
# The batch (an executor todo and the hypothesis) names todo-propose-digits and epoch 1 (seq 12-13).
step loopx append --file "$here/drafts/hypothesis_batch.json" --agent-id proposer-1 --token-file proposer.token
step loopx todo complete todo-propose-digits --epoch 1 --result '{"hypotheses": ["hyp-standardise"]}' --agent-id proposer-1 --token-file proposer.token
step loopx log
step loopx show 13
anchor="$(loopx verify --json | python3 -c 'import json,sys; h=json.load(sys.stdin)["head"]; print(str(h["seq"]) + ":" + h["hash"])')"
step loopx verify --expect "$anchor"

echo
echo "A malformed draft is refused, naming the field, and nothing is written:"
echo '{"payload": {"hypothesis_id": "hyp-trees", "title": "Bigger trees", "colour": "red"}}' > bad.json
step loopx append --kind research_hypothesis_v0 --file bad.json --agent-id proposer-1 --token-file proposer.token || echo "(exit status $?)"

echo
echo "Editing one byte of a stored record in a copy of the workspace breaks the chain:"
cp -r .loopx tampered-copy && mkdir -p tampered && mv tampered-copy tampered/.loopx
sed -i 's/Standardising/Standardizing/' tampered/.loopx/log/000000000001.jsonl
step loopx --workspace tampered verify || echo "(exit status $?)"

echo
echo "Cutting off the tail (everything after the contract, seq 8) is invisible without an anchor, and caught with one:"
cp -r .loopx cut-copy && mkdir -p cut && mv cut-copy cut/.loopx
head -n 8 cut/.loopx/log/000000000001.jsonl > cut/.loopx/log/tmp && mv cut/.loopx/log/tmp cut/.loopx/log/000000000001.jsonl
step loopx --workspace cut verify
step loopx --workspace cut verify --expect "$anchor" || echo "(exit status $?)"
echo
echo "workspace left in $work"
