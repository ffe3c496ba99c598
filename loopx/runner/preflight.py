"""What is known about a lane's command before any todo is claimed: that it cannot start (a
program not on ``PATH``, a path that does not exist or is not executable), and the script it
runs, which must be where the command will start. A claimed todo the command fails costs an
attempt, and a held-out one its hypothesis' read, so each is caught before the claim."""

from __future__ import annotations

import errno
import os
import re
import shlex
import shutil
from pathlib import Path

from loopx.runner.attempt import start_failure

# Interpreters whose first operand is the script they run: the options that take the next
# argument as their value, and those after which the command runs code or a module, not a file.
_PYTHON = (frozenset({"-W", "-X", "--check-hash-based-pycs"}), frozenset({"-m", "-c"}))
_SHELL = (frozenset({"-o", "-O", "+o", "+O", "--rcfile", "--init-file"}),
          frozenset({"-c", "-s"}))
_NODE = (frozenset({"-r", "--require", "--import", "--loader", "--input-type"}),
         frozenset({"-e", "--eval", "-p", "--print"}))
_R = (frozenset(), frozenset({"-e"}))
_INTERPRETERS = ((re.compile(r"(python|pypy)[0-9.]*"), _PYTHON),
                 (re.compile(r"(ba|da|z|k)?sh"), _SHELL), (re.compile(r"node(js)?"), _NODE),
                 (re.compile(r"Rscript"), _R))


def foreseen_failure(command: list[str], cwd: Path | None) -> str | None:
    """Why the command surely cannot start, or cannot find its script, known before any todo is
    claimed (``cwd``: where relative paths are looked up, None when that place does not exist
    yet). None: it may start."""
    program = command[0]
    if "/" not in program:
        code = errno.ENOENT if shutil.which(program) is None else None
    elif os.path.isabs(program):
        code = _start_error(Path(program))
    elif cwd is not None:
        code = _start_error(cwd / program)
    else:
        code = None  # relative to a place that does not exist yet
    if code is not None:  # worded as Popen's own OSError would be, so both paths say the same
        return start_failure(command, OSError(code, os.strerror(code), program))
    script = interpreted_script(command)
    if script is None or not (os.path.isabs(script) or cwd is not None):
        return None
    where = Path(script) if os.path.isabs(script) else cwd / script
    if where.is_file():
        return None
    return (f"the command `{shlex.join(command)}` runs the script {script}, which is not a "
            f"file" + ("" if os.path.isabs(script) else f" in {cwd}"))


def interpreted_script(command: list[str]) -> str | None:
    """The script an interpreter the command starts runs (``train.py`` of ``python3 -u
    train.py``, also through ``env``), or None: no interpreter known here, or it runs code or
    a module (``python3 -m pkg``, ``bash -c ...``)."""
    args = list(command)
    if args and os.path.basename(args[0]) == "env":
        args = args[1:]
        while args and (args[0].startswith("-") or "=" in args[0]):
            args = args[1:]
    if not args:
        return None
    name = os.path.basename(args[0])
    known = next((opts for pattern, opts in _INTERPRETERS if pattern.fullmatch(name)), None)
    if known is None:
        return None
    valued, no_script = known
    rest = iter(args[1:])
    for arg in rest:
        if arg in no_script or arg == "-":
            return None
        if arg in valued:
            next(rest, None)
        elif not arg.startswith(("-", "+")):
            return arg
    return None


def script_paths(command: list[str]) -> list[str]:
    """The relative paths a command surely reads from where it starts: the program itself,
    when given as a path, and the script an interpreter runs, or else the first argument that
    is not an option (the script of ``./run.sh`` or ``uv run train.py``'s ``run``: a word that
    names no file is passed over where this is used)."""
    program, rest = command[0], command[1:]
    named = [program] if "/" in program else []
    first = interpreted_script(command) or next((a for a in rest if not a.startswith("-")),
                                                None)
    if first is not None:
        named.append(first)
    return [p for p in named if p and not os.path.isabs(p)]


def _start_error(path: Path) -> int | None:
    """The errno starting ``path`` would fail with: missing, or a directory or not executable."""
    if not path.exists():
        return errno.ENOENT
    return errno.EACCES if path.is_dir() or not os.access(path, os.X_OK) else None
