"""Store time under a wrong clock: the host's monotonic clock bounds what a wall clock can do.
A writer whose clock is an hour ahead cannot steal a live lease, and a clock stepped back does
not stop leases from expiring; both with real processes whose clocks are shifted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loopx.kernel.canonical import add_seconds, seconds_between
from loopx.kernel.checks import Credentials
from loopx.kernel.store.clock import RATE, Anchor, stamp
from loopx.testing.research import ResearchLoop
from loopx.work.claims import should_run
from loopx.work.todos import add_todos
from loopx.workspace import find_workspace, init_workspace

T0 = "2026-12-04T06:00:00.000000Z"
BOOT = "boot-1"


def anchor(ts: str = T0, mono_s: float = 1000.0) -> Anchor:
    return Anchor(BOOT, int(mono_s * 1e9), ts)


def at(mono_s: float) -> tuple[str, int]:
    return BOOT, int(mono_s * 1e9)


# -- the rule, as a pure function ---------------------------------------------------------------

def test_a_wall_clock_inside_the_bound_is_taken_as_it_is() -> None:
    wall = add_seconds(T0, 10.5)
    out = stamp(anchor(), T0, wall, at(1010.0), bound=60)
    assert (out.ts, out.flag) == (wall, None)
    assert out.anchor == Anchor(BOOT, int(1010.0 * 1e9), wall)


def test_a_clock_an_hour_ahead_is_held_to_the_bound_and_flagged_once() -> None:
    wall = add_seconds(T0, 3600 + 5)
    out = stamp(anchor(), T0, wall, at(1005.0), bound=60)
    assert seconds_between(T0, out.ts) == pytest.approx(5 + 60 + RATE * 5)
    assert out.flag is not None and out.flag["offset_seconds"] == pytest.approx(3600)
    assert out.anchor is not None and out.anchor.ts == T0
    again = stamp(out.anchor, out.ts, add_seconds(wall, 1), at(1006.0), bound=60)
    assert again.flag is None  # one record per wrong clock, not one per append
    # An honest append in between refreshes the anchor but remembers the wrong clock ...
    honest = stamp(again.anchor, again.ts, add_seconds(T0, 7), at(1007.0), bound=60)
    assert honest.flag is None and honest.anchor is not None
    assert honest.anchor.ts == add_seconds(T0, 7)
    assert stamp(honest.anchor, honest.ts, add_seconds(T0, 3608), at(1008.0),
                 bound=60).flag is None
    # ... and a clock off by another amount is recorded again.
    assert stamp(honest.anchor, honest.ts, add_seconds(T0, 7208), at(1008.0),
                 bound=60).flag is not None


def test_a_clock_stepped_back_does_not_freeze_store_time() -> None:
    head = add_seconds(T0, 1)
    for elapsed in (120.0, 600.0, 3000.0):
        wall = add_seconds(T0, elapsed - 3600)  # the host clock went back an hour
        out = stamp(anchor(), head, wall, at(1000.0 + elapsed), bound=60)
        moved = seconds_between(T0, out.ts)
        assert moved == pytest.approx(max(1.0, elapsed - 60 - RATE * elapsed))
    assert moved > 0.7 * 3000  # still moving at most RATE slower than real time


def test_a_deliberate_step_forward_is_adopted_gradually() -> None:
    step = 3600.0
    settled = (step - 60) / RATE + 1
    wall = add_seconds(T0, settled + step)
    out = stamp(anchor(), T0, wall, at(1000.0 + settled), bound=60)
    assert out.ts == wall and out.flag is None and out.anchor is not None
    assert out.anchor.ts == wall


def test_without_an_anchor_or_after_a_reboot_the_wall_clock_is_taken() -> None:
    wall = add_seconds(T0, 7200)
    assert stamp(None, T0, wall, at(5.0)).ts == wall
    assert stamp(anchor(), T0, wall, ("boot-2", 5)).ts == wall
    assert stamp(anchor(), T0, wall, None).ts == wall  # no monotonic clock on this host
    assert stamp(anchor(), add_seconds(wall, 1), wall, None).ts == add_seconds(wall, 1)


# -- real processes with shifted clocks ---------------------------------------------------------

SITE = """
import os
from datetime import UTC, datetime, timedelta

import loopx.kernel.canonical as canonical

_OFFSET = timedelta(seconds=float(os.environ["LOOPX_TEST_CLOCK_OFFSET"]))


def _shifted_now() -> str:
    return canonical.format_ts(datetime.now(UTC) + _OFFSET)


canonical.now_ts = _shifted_now
"""


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "ws"
    root.mkdir()
    workspace, owner_token = init_workspace(root, "clock")
    config = workspace.dir / "workspace.json"
    config.write_text(json.dumps({**json.loads(config.read_text()),
                                  "max_clock_skew_seconds": 2}))
    r = ResearchLoop(workspace.ledger(), Credentials("owner", owner_token))
    r.contract()
    r.propose("h1")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    return {"root": root, "r": r, "site": site}


def todo(ws: dict[str, Any], todo_id: str, ttl: float) -> None:
    """An executor todo for h1, in the role's queue (any executor may take it)."""
    r = ws["r"]
    add_todos(r.ledger, r.agents["ev"], [{
        "todo_id": todo_id, "title": "dev run", "role": "research_executor",
        "action_kind": "run_dev_eval", "hypothesis_id": "h1", "lease_ttl_seconds": ttl}])


def skewed_claim(ws: dict[str, Any], agent: Credentials, offset: float) -> dict[str, Any]:
    """``loopx quota should-run --claim`` in a process whose wall clock is ``offset`` s off."""
    env = {**os.environ, "PYTHONPATH": str(ws["site"]), "LOOPX_TEST_CLOCK_OFFSET": str(offset),
           "LOOPX_TOKEN": str(agent.token)}
    env.pop("LOOPX_AGENT_ID", None)
    done = subprocess.run([sys.executable, "-m", "loopx.cli", "-C", str(ws["root"]), "quota",
                           "should-run", "--agent-id", agent.agent_id, "--claim", "--json"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def holder_claims(ws: dict[str, Any]) -> dict[str, Any]:
    r = ws["r"]
    got = should_run(r.ledger, "ex", claim=True, creds=r.agents["ex"])
    assert got["claimed"], got
    return dict(got["claim"])


def records(ws: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    with find_workspace(ws["root"]).store() as store:
        return [r for r, _ in store.read() if r["schema_version"] == kind]


def second_executor(ws: dict[str, Any]) -> Credentials:
    from loopx.work.agents import register_agent

    r = ws["r"]
    return Credentials("ex2", register_agent(r.ledger, r.owner, "ex2", "research_executor")[1])


def test_a_writer_an_hour_ahead_cannot_steal_a_live_lease(ws: dict[str, Any]) -> None:
    r = ws["r"]
    ex2 = second_executor(ws)
    todo(ws, "held", 600.0)
    todo(ws, "other", 600.0)
    held = holder_claims(ws)
    assert held["todo_id"] == "held"
    # The writer an hour ahead asks for work: the live lease is not its to take ...
    got = skewed_claim(ws, ex2, 3600.0)
    assert got["claimed"] and got["todo"]["todo_id"] == "other"
    # ... its claim is stamped with the host's time, and the overruled clock recorded once.
    claims = [c for c in records(ws, "auto_research_lane_claim_v1") if c["todo_id"] == "other"]
    assert seconds_between(held["lease_expires_at"], claims[0]["ts"]) < 0
    [flag] = records(ws, "store_clock_v0")
    assert flag["payload"]["offset_seconds"] == pytest.approx(3600, abs=30)
    # The live holder still holds its lease, and may heartbeat.
    from loopx.work.claims import heartbeat

    heartbeat(r.ledger, r.agents["ex"], "held", held["epoch"])
    assert r.ledger.state()["lanes"]["todos"]["held"]["holder"] == "ex"


def test_a_clock_stepped_back_an_hour_still_lets_leases_expire(ws: dict[str, Any]) -> None:
    ex2 = second_executor(ws)
    todo(ws, "short", 1.0)
    assert holder_claims(ws)["todo_id"] == "short"  # then its holder dies: no heartbeat
    time.sleep(5.0)  # real time passes; the host's clock is stepped back an hour meanwhile
    taken = skewed_claim(ws, ex2, -3600.0)
    assert taken["claimed"], taken
    assert (taken["todo"]["todo_id"], taken["todo"]["epoch"]) == ("short", 2)
    assert records(ws, "store_clock_v0")[0]["payload"]["offset_seconds"] < -3000
