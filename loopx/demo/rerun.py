"""The demo evaluator's re-run command for the reproduced gate: ``python -m loopx.demo.rerun``.

``loopx gate reproduce`` runs it in a fresh checkout of a held-out packet's evaluated commit
with the request on stdin; it evaluates the experiment that commit holds (``experiment.json``,
the project's own ``model.py`` and protected ``eval/score.py``) on the split the request names,
over its seeds, and prints the values.

Importing scikit-learn takes a cold process over a second, more than the training. So the demo's
driver starts a warm scorer (``--serve SOCKET``) that imports it once and forks a fresh child
for each request; ``--via SOCKET`` hands the request and the checkout's path to it. The child
moves into that checkout and does exactly what the command does on its own; only the import is
shared, as the persistent executor lanes share theirs. Without a scorer the command does the
work itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any


def answer(project: Path, request: dict[str, Any]) -> dict[str, Any]:
    """``{"results": [...]}`` for the request, evaluated in ``project``; ``{"error"}`` if the
    evaluation failed."""
    from loopx.demo.problem import evaluate

    try:
        experiment = json.loads((project / "experiment.json").read_text())
        seeds = list(request["seeds"])
        values = evaluate(project, experiment["family"], experiment["parameters"],
                          request["location"], seeds)
    except Exception as exc:  # noqa: BLE001 - whatever the checked-out code raised is the answer
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"results": [{"seed": seed, "value": value}
                        for seed, value in zip(seeds, values, strict=True)]}


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def ask(path: str, project: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    """The warm scorer's answer, or None when none listens at ``path`` or it gave none."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(path)
        except OSError:
            return None
        conn.sendall(json.dumps({"cwd": str(project), "request": request}).encode())
        conn.shutdown(socket.SHUT_WR)
        reply = _read_all(conn)
    return dict(json.loads(reply)) if reply else None  # none: the scorer's child failed


def serve(path: str) -> int:
    """Import what evaluation uses, then answer each connection from a fresh forked child."""
    from loopx.demo.problem import preload

    preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    while True:
        conn, _ = server.accept()
        if os.fork() == 0:
            try:  # the child answers one request and never returns to the loop
                server.close()
                message = json.loads(_read_all(conn))
                project = Path(message["cwd"])
                os.chdir(project)
                conn.sendall(json.dumps(answer(project, message["request"])).encode())
            finally:
                os._exit(0)
        conn.close()


def main(argv: list[str]) -> int:
    """``--serve SOCKET``: the warm scorer. Otherwise read the request on stdin and print the
    values (through the scorer at ``--via SOCKET`` when one listens there)."""
    if argv[:1] == ["--serve"] and len(argv) == 2:
        return serve(argv[1])
    if argv and (argv[0] != "--via" or len(argv) != 2):
        print("usage: python -m loopx.demo.rerun [--via SOCKET | --serve SOCKET]",
              file=sys.stderr)
        return 2
    request = json.load(sys.stdin)
    project = Path.cwd()
    reply = (ask(argv[1], project, request) if argv else None) or answer(project, request)
    if "error" in reply:
        print(reply["error"], file=sys.stderr)
        return 1
    print(json.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
