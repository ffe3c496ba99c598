#!/usr/bin/env bash
# A walk-through of the evidence log: init, append (one record and an atomic batch), log, show,
# verify, and what verify says about a tampered copy. Needs `loopx` on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/loopx-walkthrough.XXXXXX")"
cd "$work"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step loopx init --goal-id digits-demo --owner-token-file owner.token
step loopx append --kind research_contract_v0 --file "$here/drafts/contract.json" --agent-id curator-1 --role research_curator
step loopx append --file "$here/drafts/hypothesis_batch.json" --agent-id proposer-1 --role hypothesis_proposer
step loopx log
step loopx show 3
anchor="$(loopx verify --json | python3 -c 'import json,sys; h=json.load(sys.stdin)["head"]; print(str(h["seq"]) + ":" + h["hash"])')"
step loopx verify --expect "$anchor"

echo
echo "A malformed draft is refused, naming the field, and nothing is written:"
echo '{"payload": {"event": "exploded", "colour": "red"}}' > bad.json
step loopx append --kind rollout_event_v0 --file bad.json || echo "(exit status $?)"

echo
echo "Editing one byte of a stored record in a copy of the workspace breaks the chain:"
cp -r .loopx tampered-copy && mkdir -p tampered && mv tampered-copy tampered/.loopx
sed -i 's/Standardising/Standardizing/' tampered/.loopx/log/000000000001.jsonl
step loopx --workspace tampered verify || echo "(exit status $?)"

echo
echo "Cutting off the tail is invisible without an anchor, and caught with one:"
cp -r .loopx cut-copy && mkdir -p cut && mv cut-copy cut/.loopx
head -n 2 cut/.loopx/log/000000000001.jsonl > cut/.loopx/log/tmp && mv cut/.loopx/log/tmp cut/.loopx/log/000000000001.jsonl
step loopx --workspace cut verify
step loopx --workspace cut verify --expect "$anchor" || echo "(exit status $?)"
echo
echo "workspace left in $work"
