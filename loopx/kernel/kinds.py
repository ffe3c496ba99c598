"""The one registry of record kinds, and the checks that turn a submitted draft into a record."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from loopx.kernel.canonical import INT_MAX, INT_MIN, join_path, json_problems
from loopx.kernel.domains import KindSpec, installed
from loopx.kernel.envelope import STORE_FIELDS, Draft, Envelope
from loopx.kernel.errors import FieldProblem, RecordRejected
from loopx.kernel.tokens import TOKEN_PREFIX, token_problems


def kernel_kinds() -> tuple[KindSpec, ...]:
    """The kinds the kernel itself writes: the genesis record, repairs and overruled clocks."""
    from loopx.kernel.system_records import (
        RulesUpgradeV0,
        StoreClockV0,
        StoreRepairV0,
        WorkspaceV0,
    )

    return (
        KindSpec("workspace_v0", WorkspaceV0, "private", "computed", "init",
                 "genesis record: goal, workspace format, owner token digest"),
        KindSpec("store_repair_v0", StoreRepairV0, "private", "observed", "store",
                 "a torn tail moved to quarantine by the next lock holder"),
        KindSpec("store_clock_v0", StoreClockV0, "private", "observed", "store",
                 "a writer's wall clock the store overruled, once per wrong clock"),
        KindSpec("rules_upgrade_v0", RulesUpgradeV0, "private", "computed", "store",
                 "the log's write rules upgraded, in front of a newer version's first batch"),
    )


class _Kinds(Mapping[str, KindSpec]):
    """Every registered kind by name: the kernel's and the installed domains', built on first
    use (the record models load pydantic, which a read never needs)."""

    def __init__(self) -> None:
        self._table: dict[str, KindSpec] | None = None

    def _get(self) -> dict[str, KindSpec]:
        if self._table is None:
            own = {spec.name: spec for spec in kernel_kinds()}
            domains = installed().kinds()  # refuses a kind two domains declare
            clash = own.keys() & domains.keys()
            if clash:
                raise ValueError(f"record kind(s) {', '.join(sorted(clash))} declared twice")
            self._table = {**own, **domains}
        return self._table

    def __getitem__(self, name: str) -> KindSpec:
        return self._get()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


# A writer may lower a record's provenance below its kind's default, never raise it.
_PROVENANCE_RANK = {"claimed": 0, "self_reported": 1, "observed": 2, "computed": 2}
KINDS: Mapping[str, KindSpec] = _Kinds()


def kind_names() -> list[str]:
    """Every registered kind, sorted."""
    return sorted(KINDS)


def get_kind(name: str) -> KindSpec:
    """The spec of a kind; an unknown name is refused naming the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise RecordRejected(
            [FieldProblem("schema_version", f"unknown kind {name!r}; known: {', '.join(kind_names())}")]
        ) from None


def pydantic_problems(exc: ValidationError, prefix: str = "") -> list[FieldProblem]:
    """Translate pydantic errors into dotted field paths with short, readable problems."""
    problems = []
    for err in exc.errors(include_url=False):
        path = prefix
        for part in err["loc"]:
            path = join_path(path, part)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        problems.append(FieldProblem(path or "record", msg))
    return problems


@dataclass(frozen=True)
class Author:
    """Who is writing: envelope values used where a draft leaves them out."""

    goal_id: str
    agent_id: str | None = None
    lane_role: str | None = None
    capability: str | None = None
    authenticated: bool = False


# The version-4 and RFC 4122 variant bits of a uuid4, set on 128 random bits: the same ids
# as ``uuid.uuid4().hex`` without building a UUID object (3 us of a 23 us prepare).
_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)


def new_record_id() -> str:
    """A fresh random record id (122 random bits, laid out as a uuid4's hex)."""
    bits = int.from_bytes(os.urandom(16), "big") & _UUID4_CLEAR | _UUID4_SET
    return f"rec_{bits:032x}"


def prepare(doc: Any, author: Author, *, kind: str | None = None, where: str = "",
            allow: frozenset[str] = frozenset({"agents", "owner"})) -> dict[str, Any]:
    """Check one submitted draft and return the unsealed record (every field but the store's).

    Raises:
        RecordRejected: naming every refused field; nothing has been written.
    """
    if not isinstance(doc, dict):
        raise RecordRejected([FieldProblem(where or "record", "expected a JSON object")])
    plain = _plain(doc)
    problems = [] if plain else json_problems(doc, where) or token_problems(doc, where)
    problems += [
        FieldProblem(join_path(where, f), "assigned by loopx; remove it")
        for f in STORE_FIELDS if f in doc
    ]
    if problems:
        raise RecordRejected(problems)
    given = doc.get("payload")
    try:
        if plain and type(given) is dict:
            # The walk above proved the payload plain JSON, all the envelope's JsonValue would
            # check: the envelope is validated without walking it again (the kind's model does).
            draft = Draft.model_validate({**doc, "payload": {}})
        else:
            draft = Draft.model_validate(doc)
            given = draft.payload
    except ValidationError as exc:
        raise RecordRejected(pydantic_problems(exc, where)) from None
    name = draft.schema_version or kind
    if name is None:
        raise RecordRejected([FieldProblem(join_path(where, "schema_version"), "no kind given")])
    if kind is not None and draft.schema_version not in (None, kind):
        raise RecordRejected([FieldProblem(
            join_path(where, "schema_version"),
            f"record says {draft.schema_version!r} but the kind requested is {kind!r}")])
    spec = _lookup(name, where)
    if spec.written_by not in allow:
        raise RecordRejected([FieldProblem(
            join_path(where, "schema_version"),
            f"{name} is written only by loopx itself ({spec.written_by}), not appended")])
    payload = _checked_payload(spec, given, join_path(where, "payload"))
    goal_id = draft.goal_id or author.goal_id
    missing = []
    for field in ("agent_id", "lane_role", "capability"):
        given, own = getattr(draft, field), getattr(author, field)
        if author.authenticated and given is not None and given != own:
            missing.append(FieldProblem(join_path(where, field),
                                        f"is {given!r} but the writer is {own!r}; leave it out"))
    if (draft.provenance is not None
            and _PROVENANCE_RANK[draft.provenance] > _PROVENANCE_RANK[spec.provenance]):
        missing.append(FieldProblem(join_path(where, "provenance"),
                                    f"{draft.provenance!r} is stronger than {name}'s "
                                    f"{spec.provenance!r}; a writer may only lower it"))
    if goal_id != author.goal_id:
        missing.append(FieldProblem(join_path(where, "goal_id"),
                                    f"this workspace holds goal {author.goal_id!r}, not {goal_id!r}"))
    agent_id = draft.agent_id or author.agent_id
    lane_role = draft.lane_role or author.lane_role
    if agent_id is None:
        missing.append(FieldProblem(join_path(where, "agent_id"), "required field is missing"))
    if lane_role is None:
        missing.append(FieldProblem(join_path(where, "lane_role"), "required field is missing"))
    if missing:
        raise RecordRejected(missing)
    return {
        "schema_version": name,
        "record_id": new_record_id(),
        "goal_id": goal_id,
        "agent_id": agent_id,
        "lane_role": lane_role,
        "capability": draft.capability or author.capability,
        "todo_id": draft.todo_id,
        "epoch": draft.epoch,
        "visibility": draft.visibility or spec.visibility,
        "provenance": draft.provenance or spec.provenance,
        "payload": payload,
    }


def _plain(value: Any, depth: int = 0) -> bool:
    """True only if ``json_problems`` and ``token_problems`` would both find nothing: one walk
    with no field paths built, for the drafts that have no problem (nearly all). False means
    "look closer", and the full checks name whatever is wrong."""
    if depth > 64:
        return False
    kind = type(value)
    if kind is str:
        return TOKEN_PREFIX not in value and (value.isascii() or _encodes(value))
    if value is None or kind is bool:
        return True
    if kind is int:
        return INT_MIN <= value <= INT_MAX
    if kind is float:
        return value - value == 0.0  # finite: inf - inf and nan - nan are nan
    if kind is dict:
        for key, item in value.items():
            if (type(key) is not str or TOKEN_PREFIX in key
                    or not (key.isascii() or _encodes(key)) or not _plain(item, depth + 1)):
                return False
        return True
    if kind is list:
        return all(_plain(item, depth + 1) for item in value)
    return False  # a subclass or another type: the full checks decide


def _encodes(text: str) -> bool:
    """Whether ``text`` is valid Unicode (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _checked_payload(spec: KindSpec, payload: Any, where: str) -> dict[str, Any]:
    if spec.secrets_checked:
        from loopx.kernel.secrets import secret_problems

        found = secret_problems(payload, where)
        if found:
            raise RecordRejected(found)
    try:
        return spec.model.model_validate(payload).model_dump(mode="json")
    except ValidationError as exc:
        raise RecordRejected(pydantic_problems(exc, where)) from None


def check_payload(kind: str, payload: Any, *, context: str = "record") -> dict[str, Any]:
    """A payload of ``kind`` as it would be stored, checked as :func:`prepare` checks it, for
    a dry run that has no writer.

    Raises:
        RecordRejected: naming every refused field (under ``payload.``).
    """
    try:
        problems = json_problems(payload, "payload") or token_problems(payload, "payload")
        if problems:
            raise RecordRejected(problems)
        return _checked_payload(_lookup(kind, "schema_version"), payload, "payload")
    except RecordRejected as exc:
        raise RecordRejected(exc.problems, context=context) from None


def prepare_batch(docs: Any, author: Author, *, kind: str | None = None,
                  allow: frozenset[str] = frozenset({"agents", "owner"})) -> list[dict[str, Any]]:
    """Check a batch (a list of drafts, or one draft); refuse the whole batch on any problem."""
    if isinstance(docs, dict):
        return [prepare(docs, author, kind=kind, allow=allow)]
    if not isinstance(docs, list) or not docs:
        raise RecordRejected([FieldProblem("batch", "expected a JSON object or a non-empty array")])
    out, problems = [], []
    for i, doc in enumerate(docs):
        try:
            out.append(prepare(doc, author, kind=kind, where=f"[{i}]", allow=allow))
        except RecordRejected as exc:
            problems.extend(exc.problems)
    if problems:
        raise RecordRejected(problems, context="batch")
    return out


def _lookup(name: str, where: str) -> KindSpec:
    try:
        return get_kind(name)
    except RecordRejected as exc:
        raise RecordRejected(
            [FieldProblem(join_path(where, p.field), p.problem) for p in exc.problems]) from None


def stored_problems(record: dict[str, Any]) -> list[FieldProblem]:
    """Why a stored record does not match the envelope and its kind's model (empty when it does)."""
    try:
        env = Envelope.model_validate(record)
    except ValidationError as exc:
        return pydantic_problems(exc)
    spec = KINDS.get(env.schema_version)
    if spec is None:
        return [FieldProblem("schema_version", f"unknown kind {env.schema_version!r}")]
    try:
        spec.model.model_validate(env.payload)
    except ValidationError as exc:
        return pydantic_problems(exc, "payload")
    return []
