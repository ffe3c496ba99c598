"""Where a store lives, as written in ``workspace.json`` and ``LOOPX_STORE``: ``file`` or a
``postgresql://`` URL, with the password kept out of everything loopx writes or prints.

A PostgreSQL location is a libpq URL plus one loopx parameter, ``log``, naming the log inside
the database (several workspaces may share one database)::

    postgresql://loopx@db.internal:5432/loopx?log=mnist-width&sslmode=require

The password comes from the URL given in ``LOOPX_STORE`` or from libpq's usual places
(``PGPASSWORD``, ``~/.pgpass``, a service file); ``workspace.json`` never holds it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, unquote, urlencode

from loopx.kernel.errors import WorkspaceError
from loopx.kernel.lazy_re import lazy_compile
from loopx.kernel.plain import Frozen

ENV_STORE = "LOOPX_STORE"
FILE = "file"
SCHEMES = ("postgresql://", "postgres://")
DEFAULT_LOG = "default"
# Compiled on first use: a file-store read never matches these (about 0.5 ms at import).
LOG_NAME = lazy_compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,55}")  # LISTEN channel: 63 bytes
# Query parameters that carry a credential: dropped from every redacted form.
_SECRET_PARAMS = frozenset({"password", "sslpassword"})
# Anything that looks like a URL's ``user:password@``, wherever it appears in a text (up to
# the last ``@`` before the host, as libpq reads it: a password may hold an unescaped ``@``).
_USERINFO = lazy_compile(r"(?i)\b([a-z][a-z0-9+.\-]{0,31}://)([^/\s:@]*):([^/\s]*)@")
_URL_START = lazy_compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,31}://")
_QUOTED = lazy_compile(r'"[^"]*"|\'[^\']*\'')
_PASSWORD_PARAM = lazy_compile(r"(?i)\b((?:ssl)?password\s*=\s*)('[^']*'|[^\s&'\"]+)")


def is_postgres(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL store."""
    return location.startswith(SCHEMES)


def is_url(text: str) -> bool:
    """Whether ``text`` starts like a URL (``scheme://``): never a directory loopx should make."""
    return _URL_START.match(text) is not None


class PostgresLocation(Frozen):
    """A parsed PostgreSQL store location: the libpq URL to connect with and the log name."""

    _fields = ("conninfo", "log")
    conninfo: str  # what psycopg connects with (``log`` removed; password kept if given)
    log: str

    def __init__(self, conninfo: str, log: str) -> None:
        self.__dict__.update(conninfo=conninfo, log=log)

    @property
    def display(self) -> str:
        """The location without any password: what may be written, logged or shown."""
        return redact(self.conninfo_with_log())

    def conninfo_with_log(self) -> str:
        """The full location again (``log`` added back), password included if it had one."""
        sep = "&" if "?" in self.conninfo else "?"
        return f"{self.conninfo}{sep}log={quote(self.log, safe='')}"


def parse_postgres(location: str, *, default_log: str = DEFAULT_LOG) -> PostgresLocation:
    """Split a ``postgresql://`` location into its libpq URL and its log name.

    Raises:
        WorkspaceError: not a PostgreSQL URL, or a log name loopx cannot use.
    """
    if not is_postgres(location):
        raise WorkspaceError(f"store {redact(location)!r} is not a postgresql:// URL")
    if _ambiguous_userinfo(location):
        # Not echoed: where the password ends is exactly what cannot be told.
        raise WorkspaceError(
            "the store URL's user or password holds an unescaped '@', '/', '?' or '#', so "
            "libpq would read part of it as the host or the database",
            hint="percent-encode it (%40 for '@', %2F for '/', %3F for '?', %23 for '#'), or "
                 "leave the password out of the URL and give it in PGPASSWORD or ~/.pgpass")
    base, _, query = location.partition("?")
    params = parse_qsl(query, keep_blank_values=True)
    logs = [value for key, value in params if key == "log"]
    log = unquote(logs[-1]) if logs else default_log
    if not LOG_NAME.fullmatch(log):
        raise WorkspaceError(
            f"store {redact(location)!r}: log name {log!r} must be 1-56 letters, digits, "
            "'_', '.', ':' or '-', starting with a letter or digit",
            hint="name the log in the URL: postgresql://.../db?log=NAME")
    rest = [(key, value) for key, value in params if key != "log"]
    conninfo = f"{base}?{urlencode(rest)}" if rest else base
    return PostgresLocation(conninfo, log)


def _ambiguous_userinfo(location: str) -> bool:
    # libpq takes the user and password up to the first '@' before any '/'.
    rest = location.partition("://")[2]
    authority, slash, path = rest.partition("/")
    userinfo, at, _ = authority.partition("@")
    if at:
        return "@" in authority[len(userinfo) + 1:] or any(c in userinfo for c in "?#")
    return bool(slash) and "@" in path.partition("?")[0]


def redact(text: str, *, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with every URL password and ``password=`` value replaced by ``***``, and each
    quoted piece holding one of ``secrets`` (see :func:`passwords`) replaced by ``"***"``."""
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:***@", text)
    text = _PASSWORD_PARAM.sub(lambda m: f"{m.group(1)}***", text)
    if secrets:
        text = _QUOTED.sub(lambda m: f"{m.group()[0]}***{m.group()[0]}"
                           if any(s in m.group() for s in secrets) else m.group(), text)
        for secret in secrets:
            if len(secret) >= 4:  # (shorter ones would blank out ordinary words)
                text = text.replace(secret, "***")
    return text


def passwords(location: str) -> tuple[str, ...]:
    """The passwords written in a ``postgresql://`` location, as written and decoded: what a
    message that quotes a piece of the URL (libpq's parse errors do) must not show."""
    if not is_postgres(location):
        return ()
    _, userinfo, _, query = _split(location)
    found = [userinfo.partition(":")[2]] if userinfo and ":" in userinfo else []
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if unquote(key) in _SECRET_PARAMS:
            found.append(value)
    forms = {form for raw in found for form in (raw, unquote(raw), unquote(raw.replace("+", " ")))}
    return tuple(sorted((form for form in forms if form), key=len, reverse=True))


def without_password(location: str) -> str:
    """The location as ``workspace.json`` keeps it: no password at all (not even ``***``)."""
    if not is_postgres(location):
        return location
    scheme, userinfo, hosts, query = _split(location)
    user = userinfo.partition(":")[0] if userinfo else ""
    params = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
              if k not in _SECRET_PARAMS]
    return (f"{scheme}://{user}@{hosts}" if user else f"{scheme}://{hosts}") + (
        f"?{urlencode(params)}" if params else "")


def _split(location: str) -> tuple[str, str | None, str, str]:
    """A URL's scheme, its ``user[:password]`` (None without an ``@``), the rest of what
    comes before ``?``, and the raw query."""
    base, _, query = location.partition("?")
    scheme, _, rest = base.partition("://")
    userinfo, at, hosts = rest.rpartition("@")
    return scheme, userinfo if at else None, hosts, query
