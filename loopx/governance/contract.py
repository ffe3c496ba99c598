"""The research contract: made from a prompt plus flags, amended as new versions, shown.

The curator lane writes it (``research_contract_v0``); every version stays in the log and in
the folded state, so any process sees the same contract and can read any earlier version.
"""

from __future__ import annotations

import copy
import json
import re
from typing import TYPE_CHECKING, Any

from loopx.governance.state import current_contract
from loopx.governance.versions import pick_version
from loopx.kernel.errors import FieldProblem, RecordRejected, Refused
from loopx.kernel.identity import Identity

if TYPE_CHECKING:
    from loopx.kernel.checks import Credentials
    from loopx.kernel.ledger import Ledger
    from loopx.kernel.store.base import Record
    from loopx.work.state import LaneState

# Fields that identify a version rather than say what the campaign is.
VERSION_FIELDS = ("contract_id", "version", "supersedes", "amendment")
META_FIELDS = ("record_id", "seq", "ts", "agent_id", "visibility")
OBJECTIVE_LISTS = ("inputs", "targets", "generalization", "success_metrics")
NAME_CHARS = 80


def objective_from_prompt(prompt: str, *, name: str | None = None, domain: str | None = None,
                          **lists: list[str]) -> tuple[dict[str, Any], list[str]]:
    """An objective from a natural-language prompt plus whatever flags were given.

    Returns the objective and the metadata still missing (recorded in the contract's
    ``missing_metadata``, outside the confirmed fields, as the seed asks).
    """
    text = " ".join(prompt.split())
    if not text:
        raise RecordRejected([FieldProblem("objective.prompt", "must not be empty")])
    missing = []
    if name is None:
        first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".!?")
        name = first if len(first) <= NAME_CHARS else first[:NAME_CHARS - 3].rstrip() + "..."
        missing.append("objective.name (derived from the prompt)")
    if domain is None:
        domain = "unspecified"
        missing.append("objective.domain")
    objective: dict[str, Any] = {"name": name, "prompt": prompt, "domain": domain}
    for key in OBJECTIVE_LISTS:
        values = list(lists.get(key) or [])
        objective[key] = values
        if not values:
            missing.append(f"objective.{key}")
    return objective, missing


def payload_of(version: dict[str, Any]) -> dict[str, Any]:
    """A stored contract version without the record metadata the fold adds."""
    return {k: v for k, v in version.items() if k not in META_FIELDS}


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Dotted paths of every leaf that differs between two versions (lists compare whole).

    Both go through the contract model first, so a field a later loopx added with a default
    is not reported as changed just because an older version was stored without it.
    """
    from loopx.governance.records import ResearchContractV0

    old, new = (ResearchContractV0.model_validate(payload_of(v)).model_dump(mode="json")
                for v in (old, new))
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if not path and key in VERSION_FIELDS + META_FIELDS:
                    continue
                walk(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        elif a != b:
            out.append(path)

    walk(old, new, "")
    return sorted(out)


def parse_setting(text: str) -> tuple[str, Any]:
    """``path=value`` for ``--set``: the value is JSON when it parses, else a string.

    Raises:
        UsageProblem: no ``=``.
    """
    from loopx.kernel.errors import UsageProblem

    path, sep, raw = text.partition("=")
    if not sep or not path.strip():
        raise UsageProblem(f"--set {text!r}: expected PATH=VALUE, e.g. budget.max_cpu_hours=10")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return path.strip(), value


def scope_settings(*, baseline_hypothesis: str | None = None, protected: tuple[str, ...] = (),
                   protected_commit: str | None = None, base_commit: str | None = None,
                   editable: tuple[str, ...] = (),
                   dev_location: str | None = None,
                   heldout_location: str | None = None) -> list[tuple[str, Any]]:
    """``contract init``'s scope, split-location and measured-baseline flags as dotted-path
    settings (applied like ``--set``, before it, with or without ``--file``).

    Raises:
        UsageProblem: an empty value, naming its option.
    """
    from loopx.kernel.errors import UsageProblem

    named = [("--baseline-hypothesis", baseline_hypothesis),
             ("--protected-commit", protected_commit), ("--base-commit", base_commit),
             ("--dev-location", dev_location),
             ("--heldout-location", heldout_location), *(("--protected", p) for p in protected),
             *(("--editable", e) for e in editable)]
    for option, value in named:
        if value is not None and not value.strip():
            raise UsageProblem(f"{option} must not be empty")
    out: list[tuple[str, Any]] = []
    for path, value in (("metric.baseline_hypothesis", baseline_hypothesis),
                        ("protected_commit", protected_commit), ("base_commit", base_commit),
                        ("evaluation.dev.location", dev_location),
                        ("evaluation.heldout.location", heldout_location)):
        if value is not None:
            out.append((path, value))
    if protected:
        out.append(("protected_scope", list(protected)))
    if editable:
        out.append(("editable_scope", list(editable)))
    return out


def apply_settings(payload: dict[str, Any], settings: list[tuple[str, Any]]) -> dict[str, Any]:
    """A copy of ``payload`` with each dotted path set (the model then checks every field)."""
    out = copy.deepcopy(payload)
    for path, value in settings:
        parts = path.split(".")
        if parts[0] in VERSION_FIELDS:
            raise RecordRejected([FieldProblem(path, "cannot be set with --set: the id comes "
                                               "from --contract-id at init and never changes; "
                                               "version, supersedes and amendment are loopx's")])
        target = out
        for i, part in enumerate(parts[:-1]):
            nxt = target.setdefault(part, {})  # a section left to its defaults
            if nxt is None:  # an optional section not set yet (novelty_boundary)
                nxt = target[part] = {}
            if not isinstance(nxt, dict):
                raise RecordRejected([FieldProblem(".".join(parts[:i + 1]),
                                                   "is not a section that has fields")])
            target = nxt
        target[parts[-1]] = value
    return out


def init_contract(ledger: Ledger, creds: Credentials, payload: dict[str, Any]) -> list[Record]:
    """Write contract version 1; a campaign still ``created`` moves to ``planned`` with it.

    Raises:
        RecordRejected: a malformed contract (naming the field); Refused: one exists already;
        Forbidden: the writer is not the curator.
    """
    draft = {"schema_version": "research_contract_v0",
             "payload": {**payload, "version": 1, "supersedes": None, "amendment": None}}

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        records = ledger.prepare(draft, who)
        if current_contract(view) is None and view["campaign"]["status"]["state"] == "created":
            records += ledger.prepare({"schema_version": "campaign_transition_v0", "payload": {
                "from_state": "created", "to_state": "planned",
                "reason": "contract version 1 written"}}, who)
        return records

    # Check the draft before taking the lock, so a malformed contract never waits for it.
    ledger.prepare(draft, ledger.identify(creds))
    return ledger.write(creds, plan)


def amend_contract(ledger: Ledger, creds: Credentials, reason: str, *,
                   settings: list[tuple[str, Any]] | None = None,
                   replacement: dict[str, Any] | None = None) -> Record:
    """Write the next contract version: ``settings`` applied to the one in force, or a whole
    ``replacement``; ``amendment.changed`` is computed from the difference.

    Raises:
        Refused: no contract, or nothing changed; RecordRejected: a bad field; Forbidden.
    """

    def plan(view: LaneState, who: Identity, now: str) -> list[Record]:
        current = _in_force(view)
        [record] = ledger.prepare({"schema_version": "research_contract_v0", "payload":
                                   _next_draft(current, reason, settings, replacement)}, who)
        record["payload"]["amendment"] = _amendment(current, record["payload"], reason)
        return [record]

    return ledger.write(creds, plan)[0]


# Stands in for the curator when a dry run asks the contract's write checks, which read the
# record and the state, never the writer.
DRY_RUN = Identity("dry-run", "research_curator", "dry-run")


def preview_amendment(ledger: Ledger, reason: str, *,
                      settings: list[tuple[str, Any]] | None = None,
                      replacement: dict[str, Any] | None = None) -> dict[str, Any]:
    """The next contract version :func:`amend_contract` would write now, passed through every
    write check of its kind against the current state; writes nothing and needs no token.

    Raises:
        RecordRejected: a bad field; Refused, ResearchRefused (not recorded): what the write
        would refuse.
    """
    from loopx.kernel.kinds import check_payload

    state = ledger.state()
    view = ledger.domains.overlay(state["lanes"], ledger.settings())
    current = _in_force(view)
    payload = check_payload("research_contract_v0",
                            _next_draft(current, reason, settings, replacement),
                            context="contract")
    payload["amendment"] = _amendment(current, payload, reason)
    record = {"schema_version": "research_contract_v0", "record_id": "dry-run",
              "seq": state.seq + 1, "ts": ledger.now(), "agent_id": DRY_RUN.agent_id,
              "payload": payload}
    for check in ledger.domains.checks_for("research_contract_v0"):
        check(view, DRY_RUN, record)
    return payload


def _in_force(view: LaneState) -> dict[str, Any]:
    current = current_contract(view)
    if current is None:
        raise Refused("there is no contract to amend", hint="`loopx contract init`")
    return current


def _next_draft(current: dict[str, Any], reason: str, settings: list[tuple[str, Any]] | None,
                replacement: dict[str, Any] | None) -> dict[str, Any]:
    """The payload of the version after ``current``, its amendment still a placeholder."""
    base = payload_of(current)
    new = apply_settings(base, settings or []) if replacement is None else dict(replacement)
    new.update(contract_id=current["contract_id"], version=current["version"] + 1,
               supersedes=current["record_id"])
    return {**new, "amendment": {"changed": ["-"], "reason": reason}}


def _amendment(current: dict[str, Any], payload: dict[str, Any], reason: str) -> dict[str, Any]:
    changed = changed_fields(current, payload)
    if not changed:
        raise Refused("the amendment changes nothing")
    return {"changed": changed, "reason": reason}


def contract_version(view: LaneState, version: int | None = None) -> dict[str, Any]:
    """A contract version (the one in force by default), with its record metadata.

    Raises:
        NotFound: no contract yet, or no such version.
    """
    return pick_version(view["campaign"]["versions"], version, "contract",
                        "the curator writes one with `loopx contract init`")
