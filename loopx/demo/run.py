"""The demo driver: a workspace in a new git repository, a lane per agent as separate OS
processes, progress from the log as it grows, and a summary when the campaign stops.

The driver acts as the owner only to set up (profiles with short leases, agents and their
tokens, the first two todos); from then on the lanes share nothing but the workspace, and the
driver only reads the log, until every lane has stopped. Then it publishes the final story and
board as the narrator (its token, the same checked tools the narrator lane calls): a lane may
still append after the narrator's last turn (an executor finishing the claim it held when the
campaign stopped), and the published page must show the log as it ended.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopx.kernel.errors import UsageProblem

GOAL = "digits-demo"
LEASE_SECONDS = 10.0
HEARTBEAT_SECONDS = 2.0
POLL_SECONDS = 0.3
KILL_HOLD_SECONDS = 5.0  # with --kill-executor: how long the victim holds each result
IDLE_POLLS = 200  # a lane with nothing to do for a minute stops: the campaign has moved on
GIT_ENV = {"GIT_AUTHOR_NAME": "loopx demo", "GIT_AUTHOR_EMAIL": "demo@loopx.invalid",
           "GIT_COMMITTER_NAME": "loopx demo", "GIT_COMMITTER_EMAIL": "demo@loopx.invalid"}


@dataclass(frozen=True)
class DemoOptions:
    """What the demo runs: where, how many executors, the data split seed, the training seeds,
    how many decisions before the stop policy ends it, and how long it may take."""

    directory: Path | None = None
    executors: int = 2
    seed: int = 7
    seeds: tuple[int, ...] = (0, 1, 2)
    iterations: int = 4
    deadline_seconds: float = 300.0
    kill_executor: bool = False  # SIGKILL one executor lane while it holds a claim
    store: str | None = None  # a postgresql:// URL to run on PostgreSQL (default: file log)


@dataclass
class Lane:
    """One lane process."""

    agent_id: str
    role: str
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class DemoReport:
    """How the demo ended."""

    directory: Path
    seconds: float = 0.0
    state: str = ""
    stop_reasons: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    lanes: dict[str, int | None] = field(default_factory=dict)
    story: Path | None = None
    board: Path | None = None
    verified: bool = False
    records: int = 0
    killed: dict[str, str] | None = None  # the agent killed and the todo it held
    reclaimed: list[str] = field(default_factory=list)
    preview: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The summary as stable JSON."""
        return {"directory": str(self.directory), "seconds": round(self.seconds, 1),
                "state": self.state, "stop_reasons": self.stop_reasons,
                "promoted": self.promoted, "retired": self.retired, "lanes": self.lanes,
                "story": str(self.story) if self.story else None,
                "board": str(self.board) if self.board else None,
                "verified": self.verified, "records": self.records, "killed": self.killed,
                "reclaimed": self.reclaimed, "pending_preview": self.preview}


def _check_requirements() -> None:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise UsageProblem("the demo needs scikit-learn: pip install 'loopx[demo]'") from None


def has_git() -> bool:
    """Whether git is on PATH: without it the demo runs with no worktrees and no boundary gate."""
    return shutil.which("git") is not None


def _demo_store(store: str | None) -> str | None:
    """The store to run on: a PostgreSQL URL gets a log of this run's own (unless it names
    one) and goes to ``LOOPX_STORE``, so that every lane process connects with its password."""
    if store is None or store == "file":
        return None
    import uuid

    from loopx.kernel.store.location import is_postgres, parse_postgres

    if not is_postgres(store):
        raise UsageProblem("--store must be 'file' or a postgresql:// URL")
    location = parse_postgres(store, default_log=f"{GOAL}-{uuid.uuid4().hex[:12]}")
    url = location.conninfo_with_log()
    os.environ["LOOPX_STORE"] = url
    return url


def setup(options: DemoOptions) -> tuple[Path, dict[str, tuple[str, Path]]]:
    """The workspace, its git repository and the agents: {agent id: (role, token file)}."""
    from loopx.demo.problem import project_files
    from loopx.kernel.checks import Credentials
    from loopx.work.agents import register_agent
    from loopx.work.profiles import packaged_profiles, parse_profile
    from loopx.work.todos import add_todos
    from loopx.workspace import init_workspace, record_profiles

    root = (options.directory or Path(tempfile.mkdtemp(prefix="loopx-demo-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise UsageProblem(f"{root} is not empty; give --dir a new or empty directory")
    workspace, owner_token = init_workspace(root, GOAL, store=_demo_store(options.store))
    for name, text in project_files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "public").mkdir()
    if has_git():
        from loopx.runner.worktrees import git

        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "-c", f"user.name={GIT_ENV['GIT_AUTHOR_NAME']}",
            "-c", f"user.email={GIT_ENV['GIT_AUTHOR_EMAIL']}",
            "commit", "-q", "-m", "the demo project: model.py, and eval/ (protected)")
    ledger = workspace.ledger()
    owner = Credentials("owner", owner_token)
    # Short leases, so that a lane killed mid-attempt gives its todo back within the demo.
    profiles = {}
    for name, data in packaged_profiles().items():
        profile = parse_profile(name, data)
        profile.update(lease_ttl_seconds=LEASE_SECONDS, heartbeat_seconds=HEARTBEAT_SECONDS)
        profiles[profile["role"]] = profile
    record_profiles(ledger, owner, profiles)
    agents = {"cur": "research_curator", "prop": "hypothesis_proposer",
              **{f"ex-{i}": "research_executor" for i in range(1, options.executors + 1)},
              "ev": "evaluator_promoter", "narr": "product_narrator"}
    tokens_dir = root / ".loopx" / "tokens"
    tokens_dir.mkdir(mode=0o700)
    _save_token(tokens_dir / "owner.token", owner_token)  # so you can approve the headline
    out: dict[str, tuple[str, Path]] = {}
    for agent_id, role in agents.items():
        _, token = register_agent(ledger, owner, agent_id, role)
        out[agent_id] = (role, _save_token(tokens_dir / f"{agent_id}.token", token))
    add_todos(ledger, owner, [
        {"todo_id": "define-contract", "title": "Write the research contract",
         "role": "research_curator", "action_kind": "define_contract"},
        {"todo_id": "propose-round-1", "title": "Propose the first hypotheses",
         "role": "hypothesis_proposer", "action_kind": "propose_hypothesis",
         "blocked_by": ["define-contract"]}])
    ledger.store.close()
    return root, out


def _save_token(path: Path, token: str) -> Path:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return path


def start_scorer(root: Path, socket_path: str) -> Lane:
    """The warm scorer the evaluator's re-runs go through (:mod:`loopx.demo.rerun`): it imports
    scikit-learn once, so a re-run costs its training, not a cold import."""
    logs = root / ".loopx" / "demo-logs"
    logs.mkdir(exist_ok=True)
    log = logs / "rerun-scorer.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", "loopx.demo.rerun", "--serve",
                                    socket_path], stdout=handle, stderr=subprocess.STDOUT,
                                   cwd=root, start_new_session=True)
    return Lane("rerun-scorer", "", process, log)


def start_lanes(root: Path, agents: dict[str, tuple[str, Path]],
                options: DemoOptions, scorer: str | None = None) -> list[Lane]:
    """One ``loopx lane run`` process per agent, each with its own token file, and each with
    one persistent command that takes its todos one by one (scikit-learn imported once per
    lane, not once per todo); ``scorer`` is the warm scorer's socket, for the evaluator."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPX_TOKEN", "LOOPX_AGENT_ID")}
    env.update(GIT_ENV)
    env.update({"LOOPX_DEMO_SEED": str(options.seed),
                "LOOPX_DEMO_SEEDS": ",".join(map(str, options.seeds)),
                "LOOPX_DEMO_ITERATIONS": str(options.iterations),
                "LOOPX_DEMO_PUBLIC": str(root / "public"),
                "LOOPX_DEMO_GIT": "1" if has_git() else "0",
                "LOOPX_DEMO_SCORER": scorer or ""})
    logs = root / ".loopx" / "demo-logs"
    logs.mkdir(exist_ok=True)
    lanes = []
    victim = next(a for a, (role, _) in agents.items() if role == "research_executor")
    for agent_id, (role, token_file) in agents.items():
        log = logs / f"{agent_id}.log"
        lane_env = env
        if options.kill_executor and agent_id == victim:
            # A warm executor finishes a todo in a fraction of a second, before the driver
            # could see its claim: the one to be killed holds its result a while first.
            lane_env = {**env, "LOOPX_DEMO_HOLD_SECONDS": str(KILL_HOLD_SECONDS)}
        command = [sys.executable, "-m", "loopx.cli", "-C", str(root), "lane", "run",
                   "--role", role, "--agent-id", agent_id, "--token-file", str(token_file),
                   "--poll-seconds", str(POLL_SECONDS), "--idle-polls", str(IDLE_POLLS),
                   "--timeout", "120", "--persistent", "--json", "--",
                   sys.executable, "-m", "loopx.demo.agents", "--serve", role]
        with open(log, "wb") as handle:
            process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT,
                                       env=lane_env, cwd=root, start_new_session=True)
        lanes.append(Lane(agent_id, role, process, log))
    return lanes


def describe(record: dict[str, Any]) -> str | None:
    """A progress line for a record worth showing, or None."""
    kind, p, who = record["schema_version"], record["payload"], record["agent_id"]
    if kind == "auto_research_lane_claim_v1":
        return f"{who} claimed {record['todo_id']}"
    if kind == "research_contract_v0":
        return (f"{who} wrote the contract: {p['metric']['name']} baseline "
                f"{p['metric']['baseline']}, {len(p['metric']['seeds'])} seeds")
    if kind == "research_hypothesis_v0":
        parent = f" (refines {p['parent_id']})" if p.get("parent_id") else ""
        return f"{who} proposed {p['hypothesis_id']}: {p['title']}{parent}"
    if kind == "auto_research_evidence_packet_v0":
        values = [r["value"] for r in p["results"]]
        split = p["results"][0]["split"] if p["results"] else "-"
        return f"{who} ran {p['hypothesis_id']} on {split}: {p['status']} {values}"
    if kind == "research_evidence_event_v0":
        return f"{who} judged {p['hypothesis_id']} on {p['split']}: {p['verdict']}"
    if kind == "gate_result_v0" and p["gate"] == "reproduced":
        outcomes = [r["outcome"].replace("_", " ") for r in p["reproductions"]]
        return (f"{who} re-ran the held-out packets of {p['hypothesis_id']} from their commits: "
                f"{'passed' if p['passed'] else 'NOT PASSED'} ({', '.join(outcomes)})")
    if kind == "gate_result_v0":
        return (f"{who} checked the protected boundary of {p['hypothesis_id']} from git: "
                f"{'passed' if p['passed'] else 'FAILED'}")
    if kind == "research_decision_v0":
        return f"{who} decided: {p['hypothesis_id']} {p['outcome']} ({p['reason']})"
    if kind == "campaign_transition_v0":
        reasons = f" ({', '.join(p['stop_reasons'])})" if p["stop_reasons"] else ""
        return f"campaign {p['to_state']}{reasons}"
    if kind == "todo_event_v0" and p["event"] in ("failed", "expired", "released"):
        return f"{who} {p['event']} {record['todo_id']}: {p.get('reason') or ''}".rstrip(": ")
    if kind == "publication_v0":
        return f"{who} published the {p['surface']} ({p['first_screen_status']})"
    return None


def watch(report: DemoReport, lanes: list[Lane], options: DemoOptions,
          show: Callable[[str], None]) -> None:
    """Print progress from the log until every lane has stopped, noting in ``report`` the
    seconds taken, the executor killed (with ``kill_executor``) and the todos reclaimed."""
    from loopx.kernel.store.base import Cursor
    from loopx.workspace import find_workspace

    root = report.directory
    store = find_workspace(root).store()
    cursor = Cursor()
    started = time.monotonic()
    victim = next((lane for lane in lanes if lane.role == "research_executor"), None)
    try:
        while True:
            for record, position in store.read(cursor):
                cursor = position  # the next read starts after what was shown
                line = describe(record)
                if line:
                    show(f"[{time.monotonic() - started:5.1f}s] {line}")
                if (record["schema_version"] == "todo_event_v0"
                        and record["payload"]["event"] == "expired"):
                    report.reclaimed.append(record["todo_id"])
                if (options.kill_executor and report.killed is None and victim is not None
                        and _claimed_by(record, victim)):
                    # Mid-attempt, with no chance to release: the lease must run out.
                    os.killpg(victim.process.pid, 9)
                    report.killed = {"agent_id": victim.agent_id, "todo_id": record["todo_id"]}
                    show(f"[{time.monotonic() - started:5.1f}s] killed {victim.agent_id} "
                         f"(SIGKILL) while it holds {record['todo_id']}; its lease runs out "
                         f"in {LEASE_SECONDS:g} s and another executor takes it over")
            if all(lane.process.poll() is not None for lane in lanes):
                break
            if time.monotonic() - started > options.deadline_seconds:
                for lane in lanes:
                    _stop(lane)
                raise UsageProblem(f"the demo did not finish within "
                                   f"{options.deadline_seconds:g} s; lane logs are in "
                                   f"{root / '.loopx' / 'demo-logs'}")
            time.sleep(POLL_SECONDS)
    except BaseException:
        for lane in lanes:
            _stop(lane)
        raise
    finally:
        store.close()
    report.seconds = time.monotonic() - started


def _claimed_by(record: dict[str, Any], lane: Lane) -> bool:
    return (record["schema_version"] == "auto_research_lane_claim_v1"
            and record["agent_id"] == lane.agent_id)


def _stop(lane: Lane) -> None:
    if lane.process.poll() is None:
        try:
            os.killpg(lane.process.pid, 15)
            lane.process.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


def publish_final(root: Path, agents: dict[str, tuple[str, Path]],
                  show: Callable[[str], None]) -> list[dict[str, Any]]:
    """After every lane stopped: preview a changed first screen for the owner (unless one
    waits already) and publish the story and the board, as the narrator would, through the
    tool registry with the narrator's token. Returns what ``story.publish`` returned."""
    from loopx.kernel.checks import Credentials
    from loopx.narrator.first_screen import pending_preview, screen_sha256
    from loopx.narrator.publish import render
    from loopx.tools import ToolContext, call
    from loopx.workspace import find_workspace

    narrator = next(a for a, (role, _) in agents.items() if role == "product_narrator")
    token = agents[narrator][1].read_text().strip()
    ctx = ToolContext(find_workspace(root), Credentials(narrator, token))
    published = []
    try:
        held_back = render(ctx.ledger, "story", "md", workspace_root=root).choice.held_back
        if held_back is not None and pending_preview(ctx.view(),
                                                     screen_sha256(held_back)) is None:
            call("story.preview", ctx, {})
        for name, surface, fmt in (("story.md", "story", "md"), ("board.html", "board", "html")):
            done = call("story.publish", ctx, {"out": str(root / "public" / name),
                                               "surface": surface, "format": fmt})
            published.append(done)
            show(f"after every lane stopped: {narrator} published the final {surface} at seq "
                 f"{done['head']['seq']} ({done['first_screen']['status']})")
    finally:
        ctx.close()
    return published


def summarize(report: DemoReport, lanes: list[Lane]) -> None:
    """Note the campaign's end state, its decisions, its publications and a verify of the log
    in ``report``."""
    from loopx.kernel.verify import verify_store
    from loopx.workspace import find_workspace

    root = report.directory
    ledger = find_workspace(root).ledger()
    view = ledger.state()["lanes"]
    status = view["campaign"]["status"]
    report.state, report.stop_reasons = status["state"], list(status["stop_reasons"])
    for decision_id in sorted(view["hypothesis_decisions"].values()):
        d = view["decisions"][decision_id]
        (report.promoted if d["outcome"] == "promoted" else report.retired).append(
            d["hypothesis_id"])
    report.lanes = {lane.agent_id: lane.process.returncode for lane in lanes}
    story, board = root / "public" / "story.md", root / "public" / "board.html"
    report.story = story if story.exists() else None
    report.board = board if board.exists() else None
    verified = verify_store(ledger.store)
    report.verified, report.records = verified.ok, verified.records
    pending = [p for p in view["previews"].values() if p["approval"] is None]
    report.preview = max(pending, key=lambda p: p["seq"])["preview_id"] if pending else None
    ledger.store.close()


def run_demo(options: DemoOptions, show: Callable[[str], None]) -> DemoReport:
    """Set up, run every lane as its own process, report progress, and summarize."""
    if options.executors < 2:
        raise UsageProblem("--agents: the demo runs at least 2 executors")
    _check_requirements()
    root, agents = setup(options)
    show(f"workspace {root}: {len(agents)} agents, each a separate `loopx lane run` process")
    if not has_git():
        show("git is not on PATH: no worktrees, and the protected-boundary gate is not "
             "required in this run (install git for the real thing)")
    # A short path: a socket's must fit in 108 bytes, and the demo's directory may be deep.
    sockets = Path(tempfile.mkdtemp(prefix="loopx-demo-"))
    scorer = start_scorer(root, str(sockets / "rerun")) if has_git() else None
    try:
        lanes = start_lanes(root, agents, options,
                            str(sockets / "rerun") if scorer is not None else None)
        report = DemoReport(root)
        watch(report, lanes, options, show)
    finally:
        if scorer is not None:
            _stop(scorer)
        shutil.rmtree(sockets, ignore_errors=True)
    publish_final(root, agents, show)
    summarize(report, lanes)
    return report
