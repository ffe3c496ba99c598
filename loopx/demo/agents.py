"""The demo's lane commands: ``python -m loopx.demo.agents ROLE``, run by ``loopx lane run``.

Each reads its claim packet from stdin and the workspace from ``LOOPX_WORKSPACE`` (reads need
no token; it has none), does its role's work, and prints a ``loopx_lane_result_v0``: records to
append with the completion, or tool calls for what loopx computes itself (judgements, gate
checks, decisions, publications). The demo's settings come from ``LOOPX_DEMO_*`` variables the
driver sets for every lane.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from loopx.demo.problem import evaluate, location

PACKET = "auto_research_evidence_packet_v0"
METRIC = "accuracy"
BASELINE = ("linear", {"C": 0.05})
# The proposer's ideas: round one, then one refinement of each idea that dev evidence supports.
IDEAS: list[dict[str, Any]] = [
    {"hypothesis_id": "h-kernel", "title": "An RBF kernel machine", "mechanism_family": "kernel",
     "parameters": {"gamma": 0.05, "C": 1.0},
     "statement": "An RBF support vector machine separates the digit classes better than the "
                  "linear baseline"},
    {"hypothesis_id": "h-bayes", "title": "Naive Bayes on pixel intensities",
     "mechanism_family": "naive_bayes", "parameters": {},
     "statement": "Treating pixels as independent Gaussians is enough to beat the baseline"},
    {"hypothesis_id": "h-neighbours", "title": "Three nearest neighbours",
     "mechanism_family": "neighbours", "parameters": {"k": 3},
     "statement": "Digits of one class lie close together, so 3-NN beats the baseline"},
]
REFINEMENTS: dict[str, dict[str, Any]] = {
    "h-kernel": {"hypothesis_id": "h-kernel-c10", "title": "RBF kernel, weaker regularisation",
                 "mechanism_family": "kernel", "parameters": {"gamma": 0.05, "C": 10.0},
                 "statement": "With C=10 the kernel machine fits the training digits more "
                              "closely and generalises better still"},
    "h-neighbours": {"hypothesis_id": "h-neighbours-1", "title": "One nearest neighbour",
                     "mechanism_family": "neighbours", "parameters": {"k": 1},
                     "statement": "The single nearest training digit is the best vote"},
}


def settings() -> dict[str, Any]:
    """The demo's settings, from the environment the driver gave every lane."""
    return {"seed": int(os.environ.get("LOOPX_DEMO_SEED", "7")),
            "seeds": [int(s) for s in os.environ.get("LOOPX_DEMO_SEEDS", "0,1,2").split(",")],
            "iterations": int(os.environ.get("LOOPX_DEMO_ITERATIONS", "4")),
            "public": Path(os.environ.get("LOOPX_DEMO_PUBLIC", "public"))}


_LEDGERS: dict[str, Any] = {}


def workspace_view() -> tuple[Any, dict[str, Any]]:
    """The workspace's ledger (read only) and its folded state, caught up with the log. A
    serving command keeps its ledger between tasks and folds only what was appended since."""
    from loopx.workspace import find_workspace

    where = os.environ["LOOPX_WORKSPACE"]
    if where not in _LEDGERS:
        _LEDGERS[where] = find_workspace(where).ledger()
    ledger = _LEDGERS[where]
    return ledger, ledger.state()["lanes"]


def hypothesis_payload(ledger: Any, view: dict[str, Any], hypothesis_id: str) -> dict[str, Any]:
    """The hypothesis as its proposer wrote it (its parameters are in the record, not the
    folded state)."""
    record = ledger.store.get(view["hypotheses"][hypothesis_id]["seq"])
    return dict(record["payload"])


# -- the roles ----------------------------------------------------------------------------------

def curator(claim: dict[str, Any]) -> dict[str, Any]:
    """Measure the baseline on dev, write the contract, and make the campaign ready."""
    s = settings()
    root = Path(os.environ["LOOPX_WORKSPACE"])
    dev, heldout = location("dev", s["seed"]), location("heldout", s["seed"])
    baseline = statistics.fmean(evaluate(root, *BASELINE, dev, s["seeds"]))
    git = os.environ.get("LOOPX_DEMO_GIT", "1") == "1"
    contract = {
        "contract_id": "digits-demo",
        "objective": {"name": "Which classifier beats the linear baseline on handwritten digits",
                      "prompt": "Find a classifier for scikit-learn's 8x8 handwritten digits "
                                "that beats a regularised logistic regression on held-out "
                                "accuracy, without touching the evaluator.",
                      "domain": "vision", "targets": ["digit class"],
                      "success_metrics": [METRIC]},
        "metric": {"name": METRIC, "direction": "maximize", "baseline": round(baseline, 6),
                   "min_delta": 0.005, "seeds": s["seeds"]},
        "editable_scope": ["model.py", "experiment.json"],
        "protected_scope": ["eval/"],
        "evaluation": {"dev": {"name": "dev", "location": dev},
                       "heldout": {"name": "heldout", "location": heldout},
                       "heldout_read_budget": 1},
        # Without git nothing could verify the boundary: the gate would block every promotion.
        # Every held-out packet a promotion rests on is re-run from its commit (the reproduced
        # gate), so a typed-in value never promotes.
        "promotion_policy": {"required_gates": ["protected_boundary", "heldout", "reproduced"]
                             if git else ["heldout"]},
        "stop_policy": {"max_iterations": s["iterations"]},
        "budget": {"max_cpu_hours": 1.0},
    }
    if git:
        # The first commit holds the real evaluator (every evaluated commit must hold it) and
        # the code every experiment starts from (pinned, so no executor's packet chooses it).
        contract["protected_commit"] = contract["base_commit"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
            check=True).stdout.strip()
    return {"calls": [
        {"tool": "contract.init", "args": {"contract": contract}},
        {"tool": "campaign.transition",
         "args": {"to_state": "ready", "reason": "contract written by the curator"}}],
        "result": {"contract_id": "digits-demo", "baseline": round(baseline, 6)}}


def _proposal(idea: dict[str, Any], parent: str | None = None) -> list[dict[str, Any]]:
    hypothesis = {**idea, "claimed_by": os.environ["LOOPX_AGENT_ID"],
                  "no_grounding_reason": "the demo's own catalogue of ideas"}
    if parent is not None:
        hypothesis["parent_id"] = parent
    todo = {"todo_id": f"dev-{idea['hypothesis_id']}", "role": "research_executor",
            "action_kind": "run_dev_eval", "hypothesis_id": idea["hypothesis_id"],
            "title": f"Dev evaluation: {idea['title']}"}
    return [{"schema_version": "research_hypothesis_v0", "payload": hypothesis},
            {"schema_version": "todo_item_v0", "payload": todo}]


def proposer(claim: dict[str, Any]) -> dict[str, Any]:
    """Round one: the catalogue's ideas. A refinement todo: refine the idea it names, if the
    frontier still shows it supported."""
    if claim["todo_id"].startswith("propose"):
        records = [r for idea in IDEAS for r in _proposal(idea)]
        return {"records": records, "result": {"hypotheses": [i["hypothesis_id"]
                                                              for i in IDEAS]}}
    from loopx.research.projections import row

    parent = claim["hypothesis_id"]
    _, view = workspace_view()
    refinement = REFINEMENTS.get(parent)
    state = row(view, parent).state if parent in view["hypotheses"] else None
    if refinement is None or refinement["hypothesis_id"] in view["hypotheses"] or \
            state in ("contradicted", "retired"):
        return {"result": {"hypotheses": [], "skipped": f"nothing to refine ({state})"}}
    return {"records": _proposal(refinement, parent),
            "result": {"hypotheses": [refinement["hypothesis_id"]], "parent": parent}}


def executor(claim: dict[str, Any]) -> dict[str, Any]:
    """Run the hypothesis on the claimed split in the worktree: record the experiment as a
    commit, evaluate it over the contract's seeds with the project's own evaluator."""
    from loopx.governance.state import current_contract

    ledger, view = workspace_view()
    contract = current_contract(view)
    assert contract is not None
    hypothesis = hypothesis_payload(ledger, view, claim["hypothesis_id"])
    split = claim["data"]["split"]
    project = Path(os.environ.get("LOOPX_WORKTREE") or os.environ["LOOPX_WORKSPACE"])
    experiment = {"family": hypothesis["mechanism_family"],
                  "parameters": hypothesis.get("parameters", {})}
    (project / "experiment.json").write_text(json.dumps(experiment, sort_keys=True) + "\n")
    if os.environ.get("LOOPX_WORKTREE"):
        subprocess.run(["git", "commit", "-q", "-am", f"experiment: {hypothesis['title']}"],
                       cwd=project, check=True)
    seeds = contract["metric"]["seeds"]
    values = evaluate(project, experiment["family"], experiment["parameters"],
                      claim["data"]["location"], seeds)
    packet = {"hypothesis_id": claim["hypothesis_id"], "status": "scored",
              "results": [{"split": split, "metric": METRIC, "seed": seed, "value": value}
                          for seed, value in zip(seeds, values, strict=True)]}
    hold = float(os.environ.get("LOOPX_DEMO_HOLD_SECONDS") or 0)
    if hold:  # --kill-executor's victim: still holding its claim when the driver kills it
        time.sleep(hold)
    # No verdict of its own: what follows (judging, then perhaps a held-out run) is decided
    # from the packet in the log and the evaluator's judgement, not from this result.
    return {"records": [{"schema_version": PACKET, "payload": packet}],
            "result": {"status": "scored", "split": split}}


def evaluator(claim: dict[str, Any]) -> dict[str, Any]:
    """One step of the evaluator's chain, as its profile's successor rules hand them out: judge
    an attempt with the contract's rule (``judge_evidence``), check the protected boundary from
    git (``review_gate``), or decide what the candidates show (``decide``)."""
    hypothesis_id = claim["hypothesis_id"]
    action = os.environ.get("LOOPX_ACTION", "judge_evidence")
    if action == "review_gate":
        return _review(hypothesis_id)
    if action == "decide":
        return _decide(hypothesis_id)
    from loopx.research.evidence import judgement_payload

    split = "heldout" if claim["todo_id"].endswith("judge_heldout_attempt") else "dev"
    _, view = workspace_view()
    verdict = judgement_payload(view, hypothesis_id, split)["verdict"]
    return {"calls": [{"tool": "evidence.judge",
                       "args": {"hypothesis_id": hypothesis_id, "split": split}}],
            "result": {"split": split, "verdict": verdict}}


def _review(hypothesis_id: str) -> dict[str, Any]:
    """Check the protected boundary from git, and re-run the held-out packets (the demo's own
    re-run command, :mod:`loopx.demo.rerun`, through the driver's warm scorer when it started
    one), whichever the contract requires and is pending."""
    from loopx.research.gates import gates

    _, view = workspace_view()
    pending = [name for name, gate in gates(view, view["hypotheses"][hypothesis_id]).items()
               if name in ("protected_boundary", "reproduced") and gate.required
               and gate.status == "pending"]
    rerun = [sys.executable, "-m", "loopx.demo.rerun"]
    if os.environ.get("LOOPX_DEMO_SCORER"):
        rerun += ["--via", os.environ["LOOPX_DEMO_SCORER"]]
    calls = [{"tool": "gate.check", "args": {"hypothesis_id": hypothesis_id}}
             if name == "protected_boundary" else
             {"tool": "gate.reproduce", "args": {"hypothesis_id": hypothesis_id,
                                                 "command": rerun}} for name in pending]
    return {"calls": calls, "result": {"gates": pending}}


def _decide(hypothesis_id: str) -> dict[str, Any]:
    """Promote on a promotion candidate, else retire on the first retirement reason."""
    from loopx.research.projections import RETIRE_REASONS, row

    _, view = workspace_view()
    current = row(view, hypothesis_id)
    decide = {"hypothesis_id": hypothesis_id, "decision_id": f"d-{hypothesis_id}"}
    if current.decision is not None:
        return {"result": {"decided": None, "already": current.decision}}
    if current.promotion is not None:
        return {"calls": [{"tool": "decision.decide", "args": {**decide, "outcome": "promoted"}}],
                "result": {"decided": "promoted"}}
    if current.retirement is not None:
        reason = next(r for r in RETIRE_REASONS if r in current.retirement["reasons"])
        return {"calls": [{"tool": "decision.decide",
                           "args": {**decide, "outcome": "retired", "reason": reason}}],
                "result": {"decided": "retired", "reason": reason}}
    return {"result": {"decided": None, "state": current.state}}


def narrator(claim: dict[str, Any]) -> dict[str, Any]:
    """Publish the story and the board; preview a changed first screen for the owner."""
    from loopx.narrator.first_screen import pending_preview, screen_sha256
    from loopx.narrator.publish import render

    ledger, view = workspace_view()
    public = settings()["public"]
    calls: list[dict[str, Any]] = []
    choice = render(ledger, "story", "md").choice
    if choice.held_back is not None and \
            pending_preview(view, screen_sha256(choice.held_back)) is None:
        calls.append({"tool": "story.preview", "args": {}})
    calls += [{"tool": "story.publish", "args": {"out": str(public / "story.md"),
                                                 "surface": "story", "format": "md"}},
              {"tool": "story.publish", "args": {"out": str(public / "board.html"),
                                                 "surface": "board", "format": "html"}}]
    return {"calls": calls, "result": {"published": ["story.md", "board.html"]}}


ROLES = {"research_curator": curator, "hypothesis_proposer": proposer,
         "research_executor": executor, "evaluator_promoter": evaluator,
         "product_narrator": narrator}


# The roles that train models: a serving command imports scikit-learn before its first task.
TRAINS = ("research_curator", "research_executor")


def serve(role: str) -> int:
    """``loopx lane run --persistent``: one task per stdin line (its claim, its LOOPX_*
    variables and its directory), one result line back, until stdin closes."""
    if role in TRAINS:
        from loopx.demo.problem import preload

        preload()
    given: set[str] = set()
    for line in sys.stdin:
        task = json.loads(line)
        for name in given - task["env"].keys():
            os.environ.pop(name, None)  # nothing of the last todo leaks into this one
        os.environ.update(task["env"])
        given = set(task["env"])
        os.chdir(task["cwd"])
        out = ROLES[role](task["claim"])
        sys.stdout.write(json.dumps({"schema_version": "loopx_lane_result_v0", **out},
                                    sort_keys=True) + "\n")
        sys.stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    """Run one role's step on the claim packet from stdin and print the lane result; with
    ``--serve``, run one per stdin line (a persistent lane command)."""
    serving = argv[:1] == ["--serve"]
    args = argv[1:] if serving else argv
    if len(args) != 1 or args[0] not in ROLES:
        print(f"usage: python -m loopx.demo.agents [--serve] {{{','.join(ROLES)}}}",
              file=sys.stderr)
        return 2
    if serving:
        return serve(args[0])
    claim = json.loads(sys.stdin.read())
    out = ROLES[args[0]](claim)
    print(json.dumps({"schema_version": "loopx_lane_result_v0", **out}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
