"""Research's rules on claims and selection: an evaluation todo whose hypothesis is decided
(or out of attempts) is moot, a held-out todo is read within its budget, and a claim packet
says which split the todo evaluates.

Registered at the lanes' extension points (:mod:`loopx.work.extensions`) by
:mod:`loopx.research.domain`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopx.governance.state import current_contract
from loopx.kernel.errors import Refused, ResearchRefused
from loopx.kernel.rules import applies
from loopx.research.control import first_heldout
from loopx.research.plan import attempt_limit, plan_version
from loopx.research.state import (
    EVALUATION_SPLITS,
    HELDOUT_ACTION,
    baseline_heldout_version,
    baseline_hypothesis,
    campaign_base,
    counts,
    dev_attempts,
)
from loopx.work.extensions import PassOver

if TYPE_CHECKING:
    from loopx.kernel.checks import Identity

View = dict[str, Any]
# The key should-run lists held-out todos past their read budget under (their claim would be
# refused and recorded); a moot evaluation's claim is refused too, and listed under none.
HELDOUT_SPENT = "heldout_budget_spent"


def moot_evaluation(view: View, todo: dict[str, Any]) -> str | None:
    """Why an evaluation todo is moot, if it is: its hypothesis is decided, or (a held-out
    todo) its held-out judgement is final, or (a judge todo) it is the measured baseline.
    Handing it out would only spend data reads, or ask for what is refused."""
    hid = todo["hypothesis_id"]
    if todo["action_kind"] == "judge_evidence" and hid is not None and \
            hid == baseline_hypothesis(view):
        return "the campaign's measured baseline, never judged itself"
    if todo["action_kind"] not in EVALUATION_SPLITS or hid is None:
        return None
    decided = view["hypothesis_decisions"].get(hid)
    if decided is not None:
        outcome = view["decisions"].get(decided, {}).get("outcome")
        return f"already decided ({outcome + ', ' if outcome else ''}{decided})"
    entry = view["hypotheses"].get(hid)
    if entry is None:
        return None
    if todo["action_kind"] == HELDOUT_ACTION:
        final = first_heldout(entry)
        if final is not None and counts(view, final):
            return f"judged on held-out data at seq {final['seq']}, which is final"
        return None
    limit = attempt_limit(view)
    if len(dev_attempts(view, entry)) >= limit:
        return f"out of attempts ({limit} used under the plan in force)"
    return None


def check_claim(view: View, who: Identity, todo_id: str, todo: dict[str, Any]) -> None:
    """An evaluation todo of a decided hypothesis is not claimed; a held-out todo only while
    its hypothesis has held-out reads left and no final held-out judgement."""
    moot = moot_evaluation(view, todo)
    if moot is not None:
        raise Refused(f"todo {todo_id!r} evaluates {todo['hypothesis_id']!r}, which is {moot}")
    over = heldout_over_budget(view, todo)
    if over is None:
        return
    reads, budget = over
    hid = todo["hypothesis_id"]
    stands = baseline_heldout_version(view) if hid == baseline_hypothesis(view) else None
    if stands is not None and stands != plan_version(view):
        raise ResearchRefused(
            "heldout_budget", f"the measured baseline {hid!r} was measured on held-out data "
            f"under plan version {stands}, with the seeds in force, and that measurement stands "
            f"for every later plan: todo {todo_id!r} would measure it again (a curator could keep "
            "the lowest of several draws)", hypothesis_id=hid,
            detail={"reads": reads, "budget": budget, "plan_version": stands},
            hint="the held-out judgements under this plan compare with that measurement")
    earlier = read_under_earlier_plan(view, todo)
    if earlier is not None:
        raise ResearchRefused(
            "heldout_budget", f"hypothesis {hid!r} read the held-out data under plan version "
            f"{earlier}, and its reads are not given back by a later plan: todo {todo_id!r} "
            "would read it again", hypothesis_id=hid,
            detail={"reads": reads, "budget": budget, "plan_version": earlier},
            hint="re-measure it as a new hypothesis (refine it), which is its own test in the "
                 "campaign's family")
    raise ResearchRefused(
        "heldout_budget", f"hypothesis {hid!r} has used its held-out read budget ({reads} of "
        f"{budget}): todo {todo_id!r} would read it again",
        hypothesis_id=hid, detail={"reads": reads, "budget": budget})


def heldout_over_budget(view: View, todo: dict[str, Any]) -> tuple[int, int] | None:
    """(reads, budget) when claiming ``todo`` would exceed its hypothesis' held-out budget."""
    if todo["action_kind"] != HELDOUT_ACTION or todo["hypothesis_id"] is None:
        return None
    entry = view["hypotheses"].get(todo["hypothesis_id"])
    contract = current_contract(view)
    if entry is None or contract is None:
        return None
    if entry["hypothesis_id"] == baseline_hypothesis(view):
        # The measured baseline is never tested: one held-out attempt per plan version, failed
        # or scored, and (rules version 4) none once it was scored under an earlier plan with
        # the seeds in force, whose measurement stands.
        version = plan_version(view)
        if baseline_heldout_version(view) != version or any(
                view["packets"][p]["heldout"] and view["packets"][p]["plan_version"] == version
                for p in entry["packets"]):
            return (1, 1)
        return None
    budget = contract["evaluation"]["heldout_read_budget"]
    if read_under_earlier_plan(view, todo) is not None:
        return (entry["heldout_reads"], budget)
    return (entry["heldout_reads"], budget) if entry["heldout_reads"] >= budget else None


def read_under_earlier_plan(view: View, todo: dict[str, Any]) -> int | None:
    """The earlier plan version a held-out todo's hypothesis read the held-out data under, if
    it did (rules version 3): its looks were counted under that plan's budget, so a later plan
    (a larger budget) gives it none back."""
    entry = view["hypotheses"].get(todo["hypothesis_id"] or "")
    if (entry is None or not applies(view, 3)
            or entry["hypothesis_id"] == baseline_hypothesis(view)):
        return None
    read = entry["heldout_plan"]
    return read if read is not None and read != plan_version(view) else None


def pass_over(view: View, todo: dict[str, Any]) -> PassOver | None:
    """Selection passes over a held-out todo past its read budget and a moot evaluation; the
    words name the moot one first (a decided hypothesis is the plainer reason)."""
    over = heldout_over_budget(view, todo)
    moot = moot_evaluation(view, todo)
    if over is None and moot is None:
        return None
    hid = todo["hypothesis_id"]
    words = (f"{hid} is {moot}" if moot is not None
             else f"{hid} has no held-out read left ({over[0]} of {over[1]} used)")
    return PassOver(None, HELDOUT_SPENT if over is not None else None, words)


def split_data(view: View, todo: dict[str, Any], reveal: bool) -> dict[str, Any] | None:
    """The evaluation split a todo works on, with its location when ``reveal`` (the agent holds
    the claim): the held-out location appears only there, in a held-out todo's claim packet.
    This keeps honest agents off held-out data; the contract record itself is readable by
    anyone with the log. Also the commit the experiment starts from, once the campaign's first
    scored packet fixed one (:func:`~loopx.research.state.campaign_base`)."""
    split = EVALUATION_SPLITS.get(todo["action_kind"])
    contract = current_contract(view)
    if split is None or contract is None:
        return None
    spec = contract["evaluation"][split]
    base = campaign_base(view)
    return {"split": split, "name": spec["name"],
            "location": spec.get("location") if reveal else None,
            "base_commit": None if base is None else base["base_commit"]}
