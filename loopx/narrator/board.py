"""The board's own words and parts: the campaign's state and why it stopped (shown right under
the first screen), and each live hypothesis' next action and the role that takes it."""

from __future__ import annotations

from html import escape
from typing import Any

CAMPAIGN_WORDS = {
    "created": "created: no contract yet", "planned": "planned: the contract is written",
    "ready": "ready: waiting for its first claim", "running": "running",
    "paused": "paused", "completed": "completed", "stopped": "stopped", "failed": "failed",
}
STOP_WORDS = {
    "maximum_iterations_reached": "the stop policy's maximum number of iterations (decisions) "
                                  "was reached",
    "insufficient_improvement": "the best promoted result stopped improving for the stop "
                                "policy's patience",
    "persistent_validity_failure": "validity failures persisted",
    "operator_requested": "the owner asked it to stop",
}
PAUSE_WORDS = {
    "consecutive_failed_iterations": "iterations failed in a row (no attempt gave a result), "
                                     "as many as the stop policy allows before a pause; it "
                                     "waits for the owner to resume it",
    "target_awaits_owner_approval": "the promotion that reached the objective's target awaits "
                                    "the owner's approval, which completes the campaign",
}
COMPLETION_WORDS = {
    "objective_target_reached": "the best promoted held-out result reached the objective's "
                                "target",
}
ACTION_WORDS = {
    "run_dev_eval": "run it on dev", "run_holdout_eval": "run it on held-out data",
    "retry_attempt": "another dev attempt", "judge_evidence": "judge its evidence",
    "audit_novelty": "audit its novelty", "review_gate": "check the protected boundary",
    "decide": "decide: promote or retire it", "approve": "approve or reject the promotion",
    "add_todo": "give it a todo", "propose_hypothesis": "propose",
    "refine_hypothesis": "refine it",
}
TERMINAL = ("completed", "stopped", "failed")


def stop_words(reason: str) -> str:
    """A stop reason in words, with its name."""
    if reason.startswith("budget_exhausted:"):
        return f"the budget ran out: {reason.split(':', 1)[1]} ({reason})"
    return f"{STOP_WORDS[reason]} ({reason})" if reason in STOP_WORDS else reason


def _named(reason: str, table: dict[str, str]) -> str:
    return f"{table[reason]} ({reason})" if reason in table else reason


def campaign_line(c: dict[str, Any]) -> str:
    """The campaign's state, why it stopped, paused or completed, and its iterations against
    the limit."""
    text = f"Campaign {CAMPAIGN_WORDS.get(c['state'], c['state'])}"
    if c["stop_reasons"]:
        text += ": " + "; ".join(stop_words(r) for r in c["stop_reasons"])
    elif c.get("pause_reasons"):
        text += ": " + "; ".join(_named(r, PAUSE_WORDS) for r in c["pause_reasons"])
    elif c.get("completion"):
        text += ": " + _named(c["completion"], COMPLETION_WORDS)
    done = f"{c['iterations']} iteration" + ("" if c["iterations"] == 1 else "s")
    limit = c.get("max_iterations")
    return text + (f". {done} (decisions) of the {limit} the stop policy allows." if limit
                   else f". {done} (decisions); the stop policy sets no limit on them.")


def action_words(item: dict[str, Any]) -> str:
    """A live hypothesis' next action and who takes it, from the frontier."""
    action, role = item["action"], item["role"]
    if action is None and role is None:
        return "nothing to do until something changes"
    what = (f"{ACTION_WORDS[action]} ({action})" if action in ACTION_WORDS
            else action or "in progress")
    return f"{what}, by the {role} role" if role else what


def status(doc: dict[str, Any]) -> str:
    """The campaign's state and why it stopped, and how many hypotheses stand where."""
    c = doc["campaign"]
    shown = [h for h in doc["hypotheses"] if h["state"] != "baseline"]
    still = sum(1 for h in shown if h["state"] not in ("promoted", "retired"))
    return (f'<section class="status" id="status" data-state="{escape(c["state"])}">'
            f"<p><strong>{escape(campaign_line(c))}</strong></p>"
            f"<p>Hypotheses: {len(doc['promoted'])} promoted, {len(doc['retired'])} retired, "
            f'{still} open (<a href="#next-candidates">next actions</a>).</p></section>')
