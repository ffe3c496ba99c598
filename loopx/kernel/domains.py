"""The plug-in interface between the kernel and the domains that give records their meaning.

The kernel appends, folds and verifies records without knowing any domain: each domain declares
a :class:`Domain` (its record kinds, its slices of folded state, its fold handlers and write
checks per kind, and the follow-up records a record makes its batch carry), and
:class:`Domains` composes them in fold order. The installed set comes from the composition root
:mod:`loopx.domains`, loaded by name at first use the way plug-in hosts load entry points, so no
kernel module imports a domain.
"""

from __future__ import annotations

import importlib
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from loopx.kernel.identity import Identity
from loopx.kernel.plain import Frozen

if TYPE_CHECKING:
    from pydantic import BaseModel

View = dict[str, Any]
Record = dict[str, Any]
FoldHandler = Callable[[View, Record, dict[str, Any]], None]
Check = Callable[[View, Identity, Record], None]

# The module that builds the installed Domains (its ``DOMAINS``); named, not imported, so the
# kernel stays below every domain.
COMPOSITION_ROOT = "loopx.domains"
# Where a write's view carries the workspace's settings (read-only) for the checks whose rule
# the workspace configures. Absent when the ledger has none (a bare store, and `loopx verify`,
# which re-judges what the log alone decides).
SETTINGS = "workspace_settings"
# Where a checked view carries the rules version its batch is judged by (loopx.kernel.rules).
RULES = "rules_version"
# Where folded state carries the rules version the log is under at that point of the fold, so a
# fold handler that asks for a rule judges each record as the loopx that wrote it did.
LOG_RULES = "log_rules_version"


class KindSpec(Frozen):
    """A record kind: its payload model, envelope defaults and who may append it."""

    _fields = ("name", "model", "visibility", "provenance", "written_by", "summary",
               "secrets_checked", "pins_head")
    name: str
    model: type[BaseModel]
    visibility: Literal["public", "private"]
    provenance: Literal["observed", "computed", "self_reported", "claimed"]
    # agents/owner: appended through the checked path; loopx: built by a loopx tool or the write
    # path itself (never appended by hand); init/store: the genesis and repair records.
    written_by: Literal["agents", "owner", "loopx", "init", "store"]
    summary: str
    # Governance kinds carry free text and tool arguments: secret-shaped values are refused.
    secrets_checked: bool
    # A record that shows a rendered snapshot pins the log's head (payload head_seq, head_hash):
    # verify holds it to a head this log really had, before it.
    pins_head: bool

    def __init__(self, name: str, model: type[BaseModel],
                 visibility: Literal["public", "private"],
                 provenance: Literal["observed", "computed", "self_reported", "claimed"],
                 written_by: Literal["agents", "owner", "loopx", "init", "store"], summary: str,
                 secrets_checked: bool = False, pins_head: bool = False) -> None:
        self.__dict__.update(name=name, model=model, visibility=visibility,
                             provenance=provenance, written_by=written_by, summary=summary,
                             secrets_checked=secrets_checked, pins_head=pins_head)


class Expected(Frozen):
    """A record the batch must carry next: a successor todo, or the stop a decision fires."""

    _fields = ("label", "check")
    label: str
    check: Callable[[Record], None]

    def __init__(self, label: str, check: Callable[[Record], None]) -> None:
        self.__dict__.update(label=label, check=check)


FollowUps = Callable[[View, Record], list[Expected]]


def _no_kinds() -> Sequence[KindSpec]:
    return ()


class Domain(Frozen):
    """What one domain contributes: kinds, state slices, fold handlers, checks, follow-ups.

    ``kinds`` is called on first need only: record models load pydantic, which a read never
    pays for. ``checks`` may be such a function too (a read never runs a write check), and an
    extension hook may be a :class:`Hook` that names its function, imported on first call.
    ``writer`` (the identity a record claims), ``gate`` (the rules every record passes before
    its kind's checks) and ``identify`` (an agent's token) come from exactly one
    domain; so does ``refusal``, which turns a refusal the log keeps into a record.
    ``extensions`` are named hooks a lower domain defines and calls (``Domains.extensions``).
    ``before_fold`` and ``after_fold`` give, per kind, the records a record owes its batch,
    judged before it is folded in (successor todos of a completion) or after (the stop a
    decision fires).
    """

    _fields = ("name", "slices", "folds", "checks", "kinds", "before_fold", "after_fold",
               "writer", "gate", "identify", "refusal", "extensions")
    name: str
    slices: Mapping[str, Callable[[], Any]]
    folds: Mapping[str, FoldHandler]
    checks: Mapping[str, Check] | Callable[[], Mapping[str, Check]]
    kinds: Callable[[], Sequence[KindSpec]]
    before_fold: Mapping[str, FollowUps]
    after_fold: Mapping[str, FollowUps]
    writer: Callable[[View, Record], Identity] | None
    gate: Check | None
    identify: Callable[[View, str, str], Identity] | None
    refusal: Callable[[Identity, Exception], tuple[str, dict[str, Any]]] | None
    extensions: Mapping[str, Callable[..., Any]]

    def __init__(self, name: str, slices: Mapping[str, Callable[[], Any]], *,
                 folds: Mapping[str, FoldHandler] | None = None,
                 checks: Mapping[str, Check] | Callable[[], Mapping[str, Check]] | None = None,
                 kinds: Callable[[], Sequence[KindSpec]] = _no_kinds,
                 before_fold: Mapping[str, FollowUps] | None = None,
                 after_fold: Mapping[str, FollowUps] | None = None,
                 writer: Callable[[View, Record], Identity] | None = None,
                 gate: Check | None = None,
                 identify: Callable[[View, str, str], Identity] | None = None,
                 refusal: Callable[[Identity, Exception], tuple[str, dict[str, Any]]] | None
                 = None,
                 extensions: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.__dict__.update(
            name=name, slices=slices, folds=folds or {},
            checks={} if checks is None else checks, kinds=kinds,
            before_fold=before_fold or {}, after_fold=after_fold or {}, writer=writer,
            gate=gate, identify=identify, refusal=refusal, extensions=extensions or {})

    def check_table(self) -> Mapping[str, Check]:
        """This domain's write checks by kind (loaded now if they are loaded on demand)."""
        return self.checks() if callable(self.checks) else self.checks


class Domains:
    """Installed domains in fold order, with per-kind dispatch tables built once."""

    def __init__(self, domains: Sequence[Domain], *, version: int, rules: int = 1) -> None:
        self.domains = tuple(domains)
        self.version = version
        self.rules = rules  # the write rules' version a new batch is checked under
        self.slices: dict[str, Callable[[], Any]] = {}
        for domain in self.domains:
            for name, initial in domain.slices.items():
                if name in self.slices:
                    raise ValueError(f"slice {name!r} is declared by two domains")
                self.slices[name] = initial
        self._folds = _by_kind([_RULES_FOLDS, *(d.folds for d in self.domains)])
        self._checks: dict[str, tuple[Check, ...]] | None = None
        self._before = _by_kind(d.before_fold for d in self.domains)
        self._after = _by_kind(d.after_fold for d in self.domains)
        self.writer = _single(self.domains, "writer")
        self.gate = _single(self.domains, "gate")
        self.identify = _single(self.domains, "identify")
        self.refusal = _single(self.domains, "refusal")
        self._kinds: dict[str, KindSpec] | None = None
        self._points: dict[str, tuple[Callable[..., Any], ...]] = {}

    def initial(self) -> View:
        """The folded state of a log with no domain records yet."""
        return {name: initial() for name, initial in self.slices.items()}

    def overlay(self, view: View, settings: Mapping[str, Any] | None = None,
                rules: int | None = None) -> View:
        """A view that takes updates in front of ``view`` and leaves ``view`` unchanged; it
        carries ``settings`` (or those ``view`` carries) under :data:`SETTINGS` and the rules
        version its batch is judged by (:mod:`loopx.kernel.rules`)."""
        out: View = {name: Overlay({}, view[name]) for name in self.slices}
        if settings is None:
            settings = view.get(SETTINGS)
        if settings is not None:
            out[SETTINGS] = MappingProxyType(dict(settings))
        rules = view.get(RULES) if rules is None else rules
        if rules is not None:
            out[RULES] = rules
        return out

    def fold(self, view: View, record: Record) -> None:
        """Fold one record into ``view`` (state or overlay), domain by domain."""
        for handler in self._folds.get(record["schema_version"], ()):
            handler(view, record, record["payload"])

    def checks_for(self, kind: str) -> tuple[Check, ...]:
        """The write checks of ``kind``, in domain order (loads every domain's checks once)."""
        if self._checks is None:
            self._checks = _by_kind(d.check_table() for d in self.domains)
        return self._checks.get(kind, ())

    def before_fold(self, view: View, record: Record) -> list[Expected]:
        """Records ``record`` (not yet folded) makes its batch owe."""
        return [e for hook in self._before.get(record["schema_version"], ())
                for e in hook(view, record)]

    def after_fold(self, view: View, record: Record) -> list[Expected]:
        """Records ``record`` (just folded into ``view``) makes its batch owe."""
        return [e for hook in self._after.get(record["schema_version"], ())
                for e in hook(view, record)]

    def extensions(self, point: str) -> tuple[Callable[..., Any], ...]:
        """The hooks domains registered at extension ``point``, in domain order."""
        found = self._points.get(point)
        if found is None:  # domains are frozen: each point's hooks are gathered once
            found = tuple(d.extensions[point] for d in self.domains if point in d.extensions)
            self._points[point] = found
        return found

    def kinds(self) -> dict[str, KindSpec]:
        """Every domain's record kinds by name (loads the record models once)."""
        if self._kinds is None:
            kinds: dict[str, KindSpec] = {}
            for domain in self.domains:
                for spec in domain.kinds():
                    if spec.name in kinds:
                        raise ValueError(f"record kind {spec.name!r} is declared twice")
                    kinds[spec.name] = spec
            self._kinds = kinds
        return self._kinds


class Overlay(ChainMap):  # type: ignore[type-arg]
    """One slice of an overlay: updates go to the front map, lookups fall through to the slice.

    ChainMap's own lookups loop over its maps in Python (``get`` tests membership and then
    indexes, through a generator); an overlay has exactly two maps, and the write checks look
    entries up in it some hundred times per write, under the store lock.
    """

    def __init__(self, front: dict[str, Any], base: Mapping[str, Any]) -> None:
        self.maps = [front, base]  # type: ignore[list-item]

    def __getitem__(self, key: Any) -> Any:
        front = self.maps[0]
        if key in front:
            return front[key]
        return self.maps[1][key]  # a lazy checkpoint table loads the entry here

    def get(self, key: Any, default: Any = None) -> Any:
        front = self.maps[0]
        if key in front:
            return front[key]
        return self.maps[1].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.maps[0] or key in self.maps[1]


class Hook:
    """An extension hook named by module and function, imported on its first call, so that
    registering a hook does not load what only some commands use."""

    __slots__ = ("_fn", "module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name
        self._fn: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def resolve(self) -> Callable[..., Any]:
        """The function this hook names (imported now if it was not yet)."""
        if self._fn is None:
            self._fn = getattr(importlib.import_module(self.module), self.name)
        return self._fn

    def __repr__(self) -> str:
        return f"Hook({self.module}.{self.name})"


def _genesis_rules(view: View, record: Record, payload: dict[str, Any]) -> None:
    view[LOG_RULES] = payload.get("rules_version") or 1  # a genesis from before versions: 1


def _upgraded_rules(view: View, record: Record, payload: dict[str, Any]) -> None:
    view[LOG_RULES] = payload["to_version"]


# The kernel's own records that move the log's rules version, folded before any domain's.
_RULES_FOLDS: Mapping[str, FoldHandler] = {"workspace_v0": _genesis_rules,
                                           "rules_upgrade_v0": _upgraded_rules}


def _by_kind(tables: Iterable[Mapping[str, Any]]) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for table in tables:
        for kind, fn in table.items():
            out[kind] = (*out.get(kind, ()), fn)
    return out


def _single(domains: Sequence[Domain], hook: str) -> Any:
    found = [getattr(d, hook) for d in domains if getattr(d, hook) is not None]
    if len(found) > 1:
        raise ValueError(f"more than one domain provides {hook!r}")
    return found[0] if found else None


_installed: Domains | None = None


def installed() -> Domains:
    """The domains this installation folds and checks with (from :data:`COMPOSITION_ROOT`)."""
    global _installed
    if _installed is None:
        _installed = importlib.import_module(COMPOSITION_ROOT).DOMAINS
    return _installed
