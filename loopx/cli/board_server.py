"""``loopx board --serve``: the board on localhost, rendered (both gates included) once for
each head the log reaches while it is asked for, and reloaded by the page itself when the log's
head moves.

Serving appends nothing: it is a local view, not a publication. Only the served page carries a
script; a published board has none. The script asks ``/head?after=SEQ`` of the same server,
which answers once the log's head passes SEQ (or after 25 s): the server waits on the store
(NOTIFY on PostgreSQL, a cheap head check every 50 ms on files), so an idle board sends
nothing to a PostgreSQL server. A log moved with ``loopx store copy --use`` is followed.

Only this server's own page is answered: a request naming another host (a site whose name was
pointed at 127.0.0.1, DNS rebinding) or sent from another site's page (its ``Origin``) is
refused before anything is read, and every answer tells the browser to run no script but the
reloader (``Content-Security-Policy`` with its hash), to frame it nowhere and to sniff nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import threading
from collections.abc import Callable
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from loopx.kernel.errors import LoopxError, RedactionBlocked, WorkspaceError

if TYPE_CHECKING:
    from email.message import Message

    from loopx.workspace import Workspace

POLL_MS = 2000  # the pause before asking again after an answer (or a failed request)
LONG_POLL_SECONDS = 25.0  # how long one /head?after= request may wait for a new record


# The served page's one script, the same on every page (so the policy can name its hash): it
# reads the head the page shows from the page's meta tag.
RELOADER = ("(function(){var seen=Number(document.querySelector('meta[name=\"loopx-head-seq\"]')"
            ".content);function poll(){fetch('/head?after='+seen,{cache:'no-store'}).then("
            "function(r){return r.json()}).then(function(h){if(h.head_seq!==seen){"
            "location.reload()}}).catch(function(){}).finally(function(){setTimeout(poll,%d)})}"
            "setTimeout(poll,%d)})();" % (50, POLL_MS))
RELOADER_HASH = base64.b64encode(hashlib.sha256(RELOADER.encode()).digest()).decode()
PAGE_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
               f"script-src 'sha256-{RELOADER_HASH}'; connect-src 'self'; base-uri 'none'; "
               "form-action 'none'; frame-ancestors 'none'")
DATA_POLICY = "default-src 'none'; frame-ancestors 'none'"


def _served_head(head_seq: int) -> str:
    return (f'<meta name="loopx-head-seq" content="{head_seq}">'
            f"<script>{RELOADER}</script>")


def _foreign(headers: Message, port: int) -> tuple[int, str] | None:
    """Why a request is not answered (status, text), or None: a Host that is not this server's
    address, or an Origin that is not this server's page."""
    hosts = {f"127.0.0.1:{port}", f"localhost:{port}"} | (
        {"127.0.0.1", "localhost"} if port == 80 else set())
    named = headers.get_all("Host") or []
    if len(named) > 1 or (named and named[0].strip().lower() not in hosts):
        return 421, (f"this board answers only at http://127.0.0.1:{port}/ (the request named "
                     "another host)\n")
    origin = headers.get("Origin")
    if origin is not None and origin.strip().lower() not in {f"http://{h}" for h in hosts}:
        return 403, "this board answers its own page only, not another site's\n"
    return None


class _Served:
    """The workspace and ledger a server reads: after a move of the log (``loopx store copy
    --use`` on this host), the ones ``workspace.json`` names now, so the board follows."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.ledger = workspace.ledger()
        # The last page: rendered once per head (every reader's reload after a new record
        # asks for the same one), and rendered again as soon as the head moves.
        self._page: tuple[tuple[str, int, str], bool, str] | None = None

    def board(self) -> tuple[bool, str]:
        """(True, the page) of the board at the log's head, or (False, the redaction gate's
        findings) when the gate withholds it there; rendered only when the head has moved."""
        from loopx.narrator.publish import render

        state = self.ledger.state()
        # Keyed by the head the page's reloader is told (a record landing while it renders
        # makes the next request render again, never a page that reloads itself for good).
        head = (self.workspace.store_location, state.seq, state.cursor.hash)
        if self._page is None or self._page[0] != head:
            try:
                rendered = render(self.ledger, "board", "html",
                                  workspace_root=self.workspace.root,
                                  served_head=_served_head(state.seq))
            except RedactionBlocked as exc:  # as final at this head as a page is
                self._page = (head, False, exc.message)
            else:
                self._page = (head, True, rendered.text)
        return self._page[1], self._page[2]

    def current(self) -> str | None:
        """Follow a move if this host's workspace was switched; the reason the board cannot be
        shown (the log moved, and this host has not switched) otherwise, or None."""
        moved = self.ledger.store.moved()
        if moved is None:
            return None
        from loopx.kernel.store.moved import follow_command
        from loopx.workspace import find_workspace

        again = find_workspace(self.workspace.root)
        if again.store_location == self.workspace.store_location:
            return (f"this log moved to {moved.to or 'another store'}; run "
                    f"{follow_command(moved.to)} on this host, and the board follows it")
        self.ledger.store.close()
        self.workspace, self.ledger = again, again.ledger()
        return None


def make_server(workspace: Workspace, host: str = "127.0.0.1", port: int = 0
                ) -> ThreadingHTTPServer:
    """A server for the workspace's board; ``port`` 0 picks a free one."""
    served = _Served(workspace)
    lock = threading.Lock()  # one ledger, read by one request at a time

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            refused = _foreign(self.headers, self.server.server_address[1])
            if refused is not None:
                self._send(refused[0], "text/plain; charset=utf-8", refused[1])
                return
            path, _, query = self.path.partition("?")
            after = _after(query)
            if path == "/head" and after is not None:
                # Wait outside the lock, on a store of this request's own.
                with served.workspace.store() as store:
                    store.wait(after, LONG_POLL_SECONDS)
            with lock:
                try:
                    gone = served.current()
                    if path == "/head":
                        # A moved log's frozen head would keep an open page showing it as
                        # current: the page reloads into the notice instead.
                        if gone is not None:
                            raise WorkspaceError(gone)
                        self._send(200, "application/json",
                                   json.dumps({"head_seq": served.ledger.state().seq}))
                        return
                    if path not in ("/", "/index.html"):
                        self._send(404, "text/plain; charset=utf-8", "not found\n")
                        return
                    if gone is not None:
                        self._withheld("board not shown", gone)
                        return
                    shown, text = served.board()
                    if not shown:
                        # The gate's message names records and fields, never the values.
                        self._withheld("board withheld", text)
                        return
                except LoopxError as exc:
                    if path == "/head":  # the page's script reads JSON, and retries
                        self._send(503, "application/json", json.dumps(exc.to_json()))
                        return
                    self._withheld("board withheld", exc.message)
                    return
            self._send(200, "text/html; charset=utf-8", text)

        def _withheld(self, title: str, why: str) -> None:
            body = (f"<!DOCTYPE html><meta charset=\"utf-8\"><title>{title}</title>"
                    f"<pre>{escape(why)}</pre>{_served_head(-1)}")
            self._send(503, "text/html; charset=utf-8", body)

        def _send(self, status: int, kind: str, body: str) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Security-Policy",
                             PAGE_POLICY if kind.startswith("text/html") else DATA_POLICY)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Referrer-Policy", "no-referrer")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def _after(query: str) -> int | None:
    """The ``after=SEQ`` of a ``/head`` request, if it carries a valid one."""
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "after" and value.lstrip("-").isdigit():
            return int(value)
    return None


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(workspace: Workspace, port: int, announce: Callable[[str], None]) -> None:
    """Serve the board on localhost until interrupted (Ctrl-C or SIGTERM)."""
    signal.signal(signal.SIGTERM, _interrupt)
    server = make_server(workspace, port=port)
    announce(f"http://127.0.0.1:{server.server_address[1]}/")
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
