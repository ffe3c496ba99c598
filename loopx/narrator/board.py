"""The board's own words and parts: the campaign's state and why it stopped (shown right under
the first screen), each live hypothesis' next action and the role that takes it, and the todo
view (priority, blockers, who holds or is assigned each todo, cancellations with their reasons)."""

from __future__ import annotations

from html import escape
from typing import Any

from loopx.narrator.words import target_words

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
    "audit_novelty": "audit its novelty",
    "review_gate": "check its gates (the protected boundary; a re-run)",
    "decide": "decide: promote or retire it", "approve": "approve or reject the promotion",
    "add_todo": "give it a todo", "propose_hypothesis": "propose",
    "refine_hypothesis": "refine it",
}
TERMINAL = ("completed", "stopped", "failed")
WITHHELD = "(title withheld: it would not pass the redaction gate)"


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
        text += ": " + _named(c["completion"], COMPLETION_WORDS) + target_words(c)
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


def _todo_who(t: dict[str, Any]) -> str:
    if t.get("holder"):
        return f"held by {t['holder']}"
    return f"assigned to {t['assigned_to']}" if t.get("assigned_to") else "any agent of the role"


def _todo_note(t: dict[str, Any]) -> str:
    cancelled = t.get("cancelled")
    if cancelled is not None:
        why = cancelled["reason"]
        if why is None:
            why = ("(the reason is private)" if cancelled.get("private")
                   else "(the reason is withheld: it would not pass the redaction gate)")
        return f"cancelled by {cancelled['by']}: {why}"
    if t.get("passed_over"):
        return f"never handed out: {t['passed_over']}"
    waiting = t.get("waiting_on") or []
    return ("waiting on " + ", ".join(w or "a private todo" for w in waiting)) if waiting else ""


def todo_section(doc: dict[str, Any]) -> str:
    """The todo view: a table of what each role has left (priority, state, who, blockers), the
    cancelled todos with their reasons, and how many finished."""
    view = doc.get("todos") or {"rows": [], "more": 0, "finished": {}}
    rows = []
    for t in view["rows"]:
        if t["private"]:
            rows.append(f'<tr data-state="{escape(t["state"])}"><td>a private todo</td>'
                        f"<td>{escape(t['role'])}</td><td>{escape(t['state'])}</td>"
                        f"<td>{t['priority']}</td><td></td><td></td></tr>")
            continue
        rows.append(f'<tr data-todo="{escape(t["todo_id"])}" data-state="{escape(t["state"])}">'
                    f'<td><span class="id">{escape(t["todo_id"])}</span><br>'
                    f"{escape(t['title'] or WITHHELD)}</td><td>{escape(t['role'])}</td>"
                    f"<td>{escape(t['state'])}</td><td>{t['priority']}</td>"
                    f"<td>{escape(_todo_who(t))}</td><td>{escape(_todo_note(t))}</td></tr>")
    finished = view["finished"]
    more = (f" {view['more']} more are not listed." if view["more"] else "")
    return ('<section id="todos"><h2>Todos</h2><p>What each role has left to do, in the order '
            "it is handed out (highest priority first, then oldest), then the cancelled todos "
            f"and why. {finished.get('completed', 0)} completed and "
            f"{finished.get('failed', 0)} failed for good are not listed.{more}</p>"
            '<div class="scroll"><table><tr><th>todo</th><th>role</th><th>state</th>'
            "<th>priority</th><th>who</th><th>blockers, or why not handed out or "
            "cancelled</th></tr>"
            + ("".join(rows) or '<tr><td colspan="6">No todos left.</td></tr>')
            + "</table></div></section>")


# A board of a long campaign lists at most this many items per list (cards per column, charts,
# hypotheses in the graph picture, promoted and retired outcomes), and says where the rest are.
LIMIT = 50
SEE = {"promotion": "loopx candidates --json", "retirement": "loopx candidates --json",
       "retry": "loopx candidates --json", "next": "loopx frontier --json",
       "charts": "loopx frontier --json", "graph": "loopx graph --json",
       "evidence": "loopx story", "outcomes": "loopx story"}
WHAT = {"promotion": "cards", "retirement": "cards", "retry": "cards", "next": "cards",
        "charts": "hypotheses' charts", "graph": "hypotheses",
        "evidence": "hypotheses' evidence", "outcomes": "promoted or retired hypotheses"}
COLUMN_LISTS = (("promotion", "promoted"), ("retirement", "retired"), ("retry", None),
                ("next", None))


def bounded(doc: dict[str, Any]) -> dict[str, Any]:
    """The board's view of the story: each column cut to :data:`LIMIT` cards; the charts and
    the graph picture for at most LIMIT hypotheses (those on a card first, then tree order);
    the evidence of those and of every hypothesis on a card. ``cut`` maps each cut list to
    (shown, total); ``graph_hypotheses`` and ``evidence_hypotheses`` are in tree order."""
    out: dict[str, Any] = {**doc, "candidates": dict(doc["candidates"])}
    cut: dict[str, tuple[int, int]] = {}
    cards: set[str] = set()
    for kind, decided_name in COLUMN_LISTS:
        decided = doc[decided_name] if decided_name else []
        found = doc.get("next_actions", []) if kind == "next" else doc["candidates"].get(kind, [])
        kept = decided[:LIMIT]
        rest = found[:LIMIT - len(kept)]
        if decided_name:
            out[decided_name] = kept
            if len(decided) > LIMIT:
                cut["outcomes"] = (LIMIT, max(len(decided), cut.get("outcomes", (0, 0))[1]))
        if kind == "next":
            out["next_actions"] = rest
        elif kind in doc["candidates"]:
            out["candidates"][kind] = rest
        if len(decided) + len(found) > LIMIT:
            cut[kind] = (LIMIT, len(decided) + len(found))
        cards |= {c["key"] for c in kept + rest}
    hypotheses = doc["hypotheses"]
    order = ([h for h in hypotheses if h["key"] in cards]
             + [h for h in hypotheses if h["key"] not in cards])
    focus = {h["key"] for h in order[:LIMIT]}
    out["graph_hypotheses"] = [h for h in hypotheses if h["key"] in focus]
    out["evidence_hypotheses"] = [h for h in hypotheses if h["key"] in focus | cards]
    if len(hypotheses) > LIMIT:
        cut["graph"] = (len(focus), len(hypotheses))
        cut["evidence"] = (len(out["evidence_hypotheses"]), len(hypotheses))
    charts = doc.get("charts")
    if charts is not None:
        kept_charts = [c for c in charts["hypotheses"] if c["key"] in focus]
        out["charts"] = {**charts, "hypotheses": kept_charts}
        if len(kept_charts) < len(charts["hypotheses"]):
            cut["charts"] = (len(kept_charts), len(charts["hypotheses"]))
    out["cut"] = cut
    return out


def more_line(doc: dict[str, Any], name: str) -> str:
    """Says that the list ``name`` was cut, how far, and which command lists it all."""
    if name not in doc.get("cut", {}):
        return ""
    shown, total = doc["cut"][name]
    return (f'<p class="more" data-list="{name}" data-shown="{shown}" data-total="{total}">'
            f"Showing {shown:,} of {total:,} {WHAT[name]}; <code>{SEE[name]}</code> lists "
            "them all.</p>")


def noted(section: str, doc: dict[str, Any], name: str) -> str:
    """``section`` with :func:`more_line` right under its heading."""
    line = more_line(doc, name)
    return section.replace("</h2>", "</h2>" + line, 1) if line else section
