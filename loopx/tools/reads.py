"""What the two hot reads answer, ``quota.should_run`` and ``status``: the bodies of their tools
(:mod:`loopx.tools.quota`, :mod:`loopx.tools.status`), importable without the registry, so a
cold ``--json`` call (``loopx/cli/direct.py``) runs them without defining any tool's params.
"""

from __future__ import annotations

from typing import Any

from loopx.tools.context import ToolContext


def should_run(ctx: ToolContext, agent_id: str, claim: bool) -> dict[str, Any]:
    """What this agent should do next; with claim, select and claim in one locked step."""
    from loopx.work.claims import should_run as answer

    return answer(ctx.ledger, agent_id, claim=claim, creds=ctx.credentials() if claim else None)


def status(ctx: ToolContext) -> dict[str, Any]:
    """One screen of the campaign: agents, leases held, todos by state, profile drift."""
    from loopx.governance.state import current_contract
    from loopx.work.agents import agent_rows
    from loopx.work.todos import counts_by_state, held_rows

    state = ctx.ledger.state()
    lanes, now = state["lanes"], ctx.ledger.now()
    contract = current_contract(lanes)
    campaign = lanes["campaign"]["status"]
    base = lanes["campaign"].get("base")  # research's: plain state, so no research import
    return {
        "goal_id": state["kernel"]["goal_id"],
        "campaign": {"state": campaign["state"], "stop_reasons": campaign["stop_reasons"],
                     "contract_version": None if contract is None else contract["version"],
                     "base_commit": None if base is None else base["base_commit"]},
        "head": {"seq": state.cursor.seq, "hash": state.cursor.hash},
        "now": now,
        "roles": sorted(lanes["profiles"]),
        "agents": agent_rows(lanes, now),
        "todos": counts_by_state(lanes, now),
        "leases": [{k: row[k] for k in ("todo_id", "holder", "epoch", "lease_expires_at",
                                        "state")}
                   for row in held_rows(lanes, now)],
        "profiles_not_applied": _profile_drift(ctx, lanes),
    }


def _profile_drift(ctx: ToolContext, lanes: dict[str, Any]) -> list[str]:
    """Profile files in ``.loopx/lanes/`` that differ from the profiles in force.

    Comparing validates both sides with the profile's record model (pydantic), so each answer
    is kept in ``.loopx/checkpoints/profiles.json``, keyed by the file's bytes, the recorded
    profile and the loopx version: a pure cache, which deleting changes only speed.
    """
    import json

    from loopx import __version__

    cache_path = ctx.workspace.dir / "checkpoints" / PROFILE_CACHE
    try:
        cache = json.loads(cache_path.read_bytes())
        same: dict[str, bool] = cache["same"] if cache.get("loopx") == __version__ else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        same = {}
    missed = False
    drift = []
    for path in sorted(ctx.workspace.lanes_dir.glob("*.toml")):
        recorded = lanes["profiles"].get(path.stem)
        try:
            data = path.read_bytes()
        except OSError:
            drift.append(path.name)
            continue
        if recorded is None:
            drift.append(path.name)
            continue
        # Keyed by the contents themselves, not their digests: a few KB per profile, and a
        # status need not load hashlib (OpenSSL), which costs it more than this comparison.
        key = json.dumps([data.decode("latin-1"),
                          {k: v for k, v in recorded.items() if k != "seq"}], sort_keys=True)
        if key not in same:
            same[key] = _same_profile(path.name, data, recorded)
            missed = True
        if not same[key]:
            drift.append(path.name)
    if missed:
        _save_cache(cache_path, {"loopx": __version__, "same": same})
    return drift


PROFILE_CACHE = "profiles.json"


def _same_profile(name: str, data: bytes, recorded: dict[str, Any]) -> bool:
    from loopx.kernel.errors import RecordRejected
    from loopx.work.profiles import normal_profile, parse_profile

    try:
        return parse_profile(name, data) == normal_profile(recorded)
    except RecordRejected:
        return False


def _save_cache(path: Any, data: dict[str, Any]) -> None:
    """Best effort: a read-only workspace still answers, only slower next time."""
    import json
    import os

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
