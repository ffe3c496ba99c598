"""`loopx demo` end to end, as a user runs it: separate lane processes on a real git workspace
and scikit-learn's bundled data, until the contract's stop policy ends the campaign."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from loopx.workspace import find_workspace

pytest.importorskip("sklearn", reason="the demo needs scikit-learn (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="the demo needs git")


def demo(directory: Path, *args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_TOKEN", "LOOPX_AGENT_ID")}
    done = subprocess.run([sys.executable, "-m", "loopx.cli", "demo", "--dir", str(directory),
                           "--json", *args], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def records(directory: Path) -> list[dict[str, Any]]:
    store = find_workspace(directory).store()
    out = [r for r, _ in store.read()]
    store.close()
    return out


def numbers_in(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers_in(v)]
    return []


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    directory = tmp_path_factory.mktemp("demo") / "run"
    return directory, demo(directory)


def test_the_campaign_ends_on_a_stop_reason_with_a_promotion_and_a_retirement(
        finished: tuple[Path, dict[str, Any]]) -> None:
    _, out = finished
    assert out["state"] == "stopped"
    assert out["stop_reasons"] == ["maximum_iterations_reached"]
    assert out["promoted"] and out["retired"]
    assert "h-bayes" in out["retired"]
    assert out["verified"] is True
    assert out["seconds"] < 120


def test_every_lane_is_its_own_process_and_every_record_after_setup_is_a_lanes(
        finished: tuple[Path, dict[str, Any]]) -> None:
    directory, out = finished
    agents = {"cur", "prop", "ex-1", "ex-2", "ev", "narr"}
    assert set(out["lanes"]) == agents and set(out["lanes"].values()) == {0}
    log = records(directory)
    first_claim = next(i for i, r in enumerate(log)
                       if r["schema_version"] == "auto_research_lane_claim_v1")
    assert {r["agent_id"] for r in log[first_claim:]} == agents  # the owner set up, then left
    reports = {}
    for agent in agents:  # each lane process printed its own report
        text = (directory / ".loopx" / "demo-logs" / f"{agent}.log").read_text()
        reports[agent] = json.loads(text.strip().splitlines()[-1])
        assert reports[agent]["stopped_because"] == "campaign_stopped"
    assert reports["ex-1"]["completed"] and reports["ex-2"]["completed"]
    # Refinements come from the frontier: a child of a supported hypothesis.
    children = [r["payload"] for r in log if r["schema_version"] == "research_hypothesis_v0"
                and r["payload"].get("parent_id")]
    assert children


def test_executors_worked_on_their_own_branches_and_left_the_project_clean(
        finished: tuple[Path, dict[str, Any]]) -> None:
    directory, _ = finished
    packets = [r["payload"] for r in records(directory)
               if r["schema_version"] == "auto_research_evidence_packet_v0"]
    assert packets and all(p["branch"].startswith("loopx/") for p in packets)
    assert all(p["evaluated_commit"] != p["base_commit"] for p in packets)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=directory,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""
    assert not any((directory / ".loopx" / "worktrees").glob("*"))


def test_every_promotion_rests_on_held_out_packets_re_run_from_their_commits(
        finished: tuple[Path, dict[str, Any]]) -> None:
    """The contract requires the reproduced gate: each promoted hypothesis' held-out packet was
    re-run from the commit it cites (through the driver's warm scorer, which is gone after the
    run) and gave the values it recorded."""
    directory, out = finished
    log = records(directory)
    [contract] = [r["payload"] for r in log if r["schema_version"] == "research_contract_v0"]
    assert "reproduced" in contract["promotion_policy"]["required_gates"]
    reruns = {r["payload"]["hypothesis_id"]: r["payload"] for r in log
              if r["schema_version"] == "gate_result_v0" and r["payload"]["gate"] == "reproduced"}
    assert set(out["promoted"]) <= set(reruns)
    heldout = {r["record_id"]: r["payload"] for r in log
               if r["schema_version"] == "auto_research_evidence_packet_v0"
               and r["payload"]["results"][0]["split"] == "heldout"}
    for hypothesis_id in out["promoted"]:
        rerun = reruns[hypothesis_id]
        assert rerun["passed"] and rerun["tolerance"] == 0
        [done] = rerun["reproductions"]
        packet = heldout[done["packet_id"]]
        assert done["outcome"] == "reproduced"
        assert done["evaluated_commit"] == packet["evaluated_commit"]
        assert [(v["seed"], v["reproduced"]) for v in done["values"]] == [
            (r["seed"], r["value"]) for r in packet["results"]]
    scorer = subprocess.run(["pgrep", "-f", "loopx.demo.rerun --serve"], capture_output=True)
    assert scorer.stdout == b""


class Shown(HTMLParser):
    """The text a reader of a page can see or hover: its text (SVG text and titles included,
    the style sheet not) and its title attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._style = tag == "style"
        self.parts += [v for k, v in attrs if k == "title" and v]

    def handle_endtag(self, tag: str) -> None:
        self._style = False

    def handle_data(self, data: str) -> None:
        if not self._style:
            self.parts.append(data)


def shown_text(page: str) -> str:
    parser = Shown()
    parser.feed(page)
    return "\n".join(parser.parts)


def test_every_number_in_the_story_and_the_board_is_in_the_log(
        finished: tuple[Path, dict[str, Any]]) -> None:
    """Every decimal the story and the board show is a logged value at the precision shown,
    except the figures they compute (marked "(computed"), which are recomputed from their
    logged inputs."""
    from narrator_support import check_numbers

    from loopx.narrator.publish import render

    directory, out = finished
    log = records(directory)
    logged = {format(n, ".4g") for r in log for n in numbers_in(r["payload"])}
    logged |= {str(n) for r in log for n in numbers_in(r["payload"]) if isinstance(n, int)}
    # The computed figures, each checked against its logged inputs and recomputed from them.
    workspace = find_workspace(directory)
    ledger = workspace.ledger()
    try:
        numbers = render(ledger, "board", "html").story.numbers
    finally:
        ledger.store.close()
    payloads = {r["record_id"]: r["payload"] for r in log}
    assert check_numbers(numbers, payloads.__getitem__) >= 2
    computed = {format(n["value"], ".4g") for n in numbers if "derived" in n}
    board = Path(out["board"]).read_text()
    for text in (Path(out["story"]).read_text(), shown_text(board)):
        shown = re.findall(r"at most ([+-]?\d+(?:\.\d+)?(?:e-?\d+)?) \(computed", text)
        assert shown and all(n in computed for n in shown), (shown, computed)
        # Decimals, and the integers inside value and seed lists (ids, hashes, seqs and the
        # computed figures aside).
        text = re.sub(r"rec_[0-9a-f]{32}|[0-9a-f]{12,64}", "", text)
        text = re.sub(r"at most [^ ]+ \(computed", "", text)
        decimals = re.findall(r"(?<![\w.])[+-]?\d+\.\d+(?:e-?\d+)?", text)
        listed = [n for group in re.findall(r"(?:values|seeds) \\?\[([^\]\\]*)", text)
                  for n in group.split(", ")]
        assert decimals and listed
        for n in decimals + listed:
            assert n.lstrip("+") in logged, n
    # The board's charts draw every value of every public packet, each with its hover title.
    packets = [r for r in log if r["schema_version"] == "auto_research_evidence_packet_v0"]
    values = sum(len(r["payload"]["results"]) for r in packets)
    assert board.count('data-kind="value"') == values
    assert len(re.findall(r'data-kind="value"><title>[^<]+ value [0-9.]+, seed \d+, attempt',
                          board)) == values


def test_the_published_story_and_board_show_the_log_as_it_ended(
        finished: tuple[Path, dict[str, Any]]) -> None:
    """After every lane stopped, the driver publishes both once more as the narrator: nothing
    but those publications follows the snapshot the published files pin."""
    directory, out = finished
    log = records(directory)
    assert [(r["schema_version"], r["agent_id"], r["payload"]["surface"]) for r in log[-2:]] == [
        ("publication_v0", "narr", "story"), ("publication_v0", "narr", "board")]
    last_work = max(r["seq"] for r in log if r["schema_version"] not in (
        "publication_v0", "publication_preview_v0"))
    stop = next(r["seq"] for r in log if r["schema_version"] == "campaign_transition_v0"
                and r["payload"]["to_state"] == "stopped")
    for surface, path in (("story", out["story"]), ("board", out["board"])):
        [last] = [r for r in log if r["schema_version"] == "publication_v0"
                  and r["payload"]["surface"] == surface][-1:]
        assert last["agent_id"] == "narr" and last["seq"] > stop
        assert last["payload"]["head_seq"] >= last_work  # nothing happened after it but this
        data = Path(path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == last["payload"]["output_sha256"]
    board = Path(out["board"]).read_text()
    assert "Campaign stopped: the stop policy&#x27;s maximum number of iterations" in board
    assert "(maximum_iterations_reached)" in board
    # The first screen the owner is asked to approve is the one these publications held back.
    held_back = [r["payload"] for r in log if r["schema_version"] == "publication_v0"][-1]
    if held_back["first_screen_status"] == "held_back":
        [preview] = [r["payload"] for r in log if r["schema_version"] == "publication_preview_v0"
                     and r["payload"]["preview_id"] == out["pending_preview"]]
        assert preview["first_screen_sha256"] == held_back["held_back_sha256"]


def test_a_killed_executor_does_not_stop_the_campaign(tmp_path: Path) -> None:
    out = demo(tmp_path / "run", "--kill-executor")
    killed = out["killed"]
    assert killed is not None and out["lanes"][killed["agent_id"]] == -9
    assert out["state"] == "stopped" and out["verified"] is True
    log = records(tmp_path / "run")
    stop = next(r["seq"] for r in log if r["schema_version"] == "campaign_transition_v0"
                and r["payload"]["to_state"] == "stopped")
    expiries = [r for r in log if r["schema_version"] == "todo_event_v0"
                and r["payload"]["event"] == "expired" and r["todo_id"] == killed["todo_id"]]
    if expiries:  # taken over by the other executor once the lease ran out
        assert expiries[0]["agent_id"] != killed["agent_id"]
        assert killed["todo_id"] in out["reclaimed"]
    else:  # or the campaign had already stopped: nothing was left waiting on it
        held = [r for r in log if r["todo_id"] == killed["todo_id"]]
        assert held[-1]["schema_version"] == "auto_research_lane_claim_v1"
        assert held[-1]["seq"] < stop


@pytest.mark.slow
def test_the_whole_campaign_runs_on_postgresql(pg_url: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The same campaign with its log on PostgreSQL (needs LOOPX_TEST_PG; see conftest)."""
    from loopx.kernel.store.location import without_password

    directory = tmp_path / "run"
    out = demo(directory, "--store", pg_url)
    assert out["state"] == "stopped" and out["verified"] is True
    assert out["promoted"] and out["retired"]
    password = pg_url.split("://", 1)[1].rpartition("@")[0].partition(":")[2]
    assert password not in json.dumps(out)
    recorded = json.loads((directory / ".loopx" / "workspace.json").read_text())["store"]
    assert recorded == without_password(pg_url) and not (directory / ".loopx" / "log").exists()
    monkeypatch.setenv("LOOPX_STORE", pg_url)
    assert len(records(directory)) == out["records"]
