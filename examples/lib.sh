# Shared by the example scripts (sourced, not run): which loopx to run, and helpers that print
# each command like a console session before running it.

LOOPX="${LOOPX:-loopx}"
if [[ "$LOOPX" == */* ]]; then
    LOOPX="$(cd "$(dirname "$LOOPX")" && pwd)/$(basename "$LOOPX")"
fi
command -v "$LOOPX" >/dev/null || { echo "no loopx: set LOOPX or put loopx on PATH" >&2; exit 2; }

quote() {  # print arguments as a shell command line
    local out="" a
    for a in "$@"; do
        if [[ "$a" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
    done
    printf '%s' "${out# }"
}
step() { printf '\n$ loopx %s\n' "$(quote "$@")"; "$LOOPX" "$@" 2>&1; }
run() { printf '\n$ %s\n' "$(quote "$@")"; "$@" 2>&1; }
field() { python3 -c 'import json,sys; d=json.load(sys.stdin)
for k in sys.argv[1].split("."): d=d[k]
print(json.dumps(d, sort_keys=True) if isinstance(d, (dict, list)) else d)' "$1"; }
