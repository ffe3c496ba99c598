"""The case story and the board as self-contained HTML: inline CSS and SVG, no scripts, no
fonts, images or styles fetched from anywhere. Every text from a record is escaped."""

from __future__ import annotations

from html import escape
from typing import Any

from loopx.narrator import board, chart, research_plan, svg, words
from loopx.narrator.legend import Legend, card_key
from loopx.narrator.markdown import anchor
from loopx.narrator.reader import number, signed

CSS = """
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;
background:#f6f8fa}
main{max-width:1240px;margin:0 auto;padding:24px}
header.first{background:#fff;border:1px solid #d0d7de;border-radius:10px;padding:24px 28px;
margin-bottom:16px}
header.first h1{margin:0 0 8px;font-size:28px;overflow-wrap:anywhere}
header.first p.headline{font-size:18px;margin:0 0 16px;overflow-wrap:anywhere}
a.cta{display:inline-block;background:#1f6feb;color:#fff;padding:8px 16px;border-radius:6px;
text-decoration:none;font-weight:600}
p.anchor{color:#57606a;font-size:12px;margin:14px 0 0;overflow-wrap:anywhere}
section{background:#fff;border:1px solid #d0d7de;border-radius:10px;padding:16px 24px;
margin-bottom:24px;overflow-wrap:break-word}
section.status{padding:10px 24px;border-left:4px solid #57606a}
section.status p{margin:2px 0}
h2{font-size:20px;margin:4px 0 12px}
h3{font-size:16px;margin:16px 0 6px}
code,.id{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;
overflow-wrap:anywhere}
.columns{display:grid;grid-template-columns:repeat(4,minmax(0,1fr));gap:14px}
.column{background:#f6f8fa;border-radius:8px;padding:12px;min-height:120px;min-width:0}
.column h2{font-size:16px;margin:0}
.column p.meaning{color:#57606a;font-size:13px;margin:2px 0 10px}
.card{display:block;background:#fff;border:1px solid #d0d7de;border-left:5px solid #6e7781;
border-radius:6px;padding:10px 12px;margin-bottom:10px;color:inherit;text-decoration:none}
.card:hover{border-top-color:#1f6feb;border-right-color:#1f6feb;border-bottom-color:#1f6feb}
.card .title{font-weight:600;display:block}
.card .meta,figcaption .meta{font-size:12px;color:#57606a;display:block}
.empty{color:#57606a;font-size:13px}
.legend{font-size:12px;color:#57606a;margin:10px 0 0}
.legend ul{list-style:none;padding:0;margin:4px 0 0;display:flex;flex-wrap:wrap;gap:4px 16px}
.legend li{display:flex;align-items:center;gap:6px;color:#1f2328}
.swatch{flex:none;display:inline-block;vertical-align:middle}
.swatch.card{width:14px;height:16px;background:#fff;border:1px solid #d0d7de;
border-left:5px solid;border-radius:2px}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(340px,100%),1fr));
gap:14px;margin-top:12px}
figure.chart{margin:0;background:#fff;border:1px solid #d8dee4;border-radius:8px;padding:8px 10px}
figcaption{font-size:13px;margin-bottom:4px}
svg.chart{display:block;width:100%;max-width:480px;height:auto}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #d8dee4;vertical-align:top}
.scroll{overflow-x:auto;max-width:100%}
ul{padding-left:20px}
.tree li{margin:2px 0}
p.full-title{margin:-4px 0 6px;color:#57606a}
@media (max-width:1100px){.columns{grid-template-columns:repeat(2,minmax(0,1fr))}}
@media (max-width:800px){.columns{grid-template-columns:minmax(0,1fr)}main{padding:10px}
section{padding:12px 14px}header.first{padding:16px}header.first h1{font-size:22px}
header.first p.headline{font-size:16px}}
"""


# A rendered page runs no script and loads nothing: the browser enforces it, so even text that
# an escaping bug let through as markup could not act. (A served board replaces this policy with
# its server's, which allows its one script: see loopx.cli.board_server.)
PAGE_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
               "form-action 'none'")
POLICY_META = f'<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">'


def _page(title: str, body: list[str], head: str | None = None) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"{POLICY_META if head is None else head}<title>{escape(title)}</title>"
            f"<style>{CSS}</style></head>"
            "<body><main>" + "".join(body) + "</main></body></html>\n")


def _first_screen(doc: dict[str, Any]) -> str:
    screen = doc["first_screen"]
    action = screen["primary_action"]
    return (f'<header class="first" id="top"><h1>{escape(screen["title"])}</h1>'
            f'<p class="headline">{escape(screen["headline"])}</p>'
            f'<a class="cta" href="{escape(action["href"])}">{escape(action["label"])}</a>'
            f'<p class="anchor">{escape(words.anchor_line(doc["anchor"]))} Check a copy of '
            f'the log with <code>{escape(words.verify_command(doc["anchor"]))}</code>.</p>'
            "</header>")


def _li(items: list[str], empty: str) -> str:
    return "<ul>" + ("".join(f"<li>{i}</li>" for i in items) or f"<li>{escape(empty)}</li>") \
        + "</ul>"


def _question(doc: dict[str, Any]) -> str:
    contract, campaign = doc["contract"], doc["campaign"]
    if contract is None:
        return "<section><h2>The question</h2><p>No research contract yet.</p></section>"
    if contract["private"]:
        return (f"<section><h2>The question</h2><p>The contract "
                f'(<span class="id">{contract["record_id"]}</span>) is private.</p></section>')
    stop = escape(words.campaign_why(campaign))
    return ("<section><h2>The question</h2>"
            f"<p><strong>{escape(contract['question'])}</strong></p>"
            f"<p>{escape(contract['prompt'])}</p>"
            + _li([escape(words.metric_words(contract)),
                   f"Rule: {escape(contract['rule'])} at alpha {number(contract['alpha'])}; "
                   f"dev split {escape(contract['splits']['dev'])}, held-out split "
                   f"{escape(contract['splits']['heldout'])}",
                   escape(words.gates_words(contract)),
                   f"Contract version {contract['version']} "
                   f'(<span class="id">{contract["record_id"]}</span>); campaign '
                   f"{escape(campaign['state'])}{stop}"], "")
            + "</section>")


def _nested(lines: list[tuple[int, str]], empty: str) -> str:
    """Lines at depth 0 as list items, deeper ones as a list inside the item before them."""
    items: list[tuple[str, list[str]]] = []
    for depth, line in lines:
        if depth and items:
            items[-1][1].append(escape(line))
        else:
            items.append((escape(line), []))
    return _li([text + (_li(sub, "") if sub else "") for text, sub in items], empty)


def _disclosure(doc: dict[str, Any]) -> str:
    d = doc["disclosure"]
    tests = ""
    if d["tests"]:
        tests = ("<p>The held-out family, in the order fixed by each hypothesis' first held-out "
                 "claim:</p>" + _li([escape(words.test_line(t)) for t in d["tests"]], ""))
    return ('<section id="disclosure"><h2>Disclosure</h2><p>How many ideas were tried and '
            "tested, and what the campaign's error control promises: read every result below "
            "against these numbers.</p>"
            + _li([escape(line) for line in words.disclosure_lines(d)], "") + tests
            + "</section>")


def _plan(doc: dict[str, Any]) -> str:
    return ('<section id="plan"><h2>The analysis plan</h2><p>What decides what a measurement '
            "means. It freezes at the first evidence packet; an amendment after that opens a "
            "new plan version and never rescues a judgement made under the old one.</p>"
            + _nested(words.plan_lines(doc["disclosure"]["plans"]),
                      "No plan published (no contract, or a private one).") + "</section>")


def _research_plan(doc: dict[str, Any]) -> str:
    """The research plan's section, only when one was recorded."""
    plan = doc.get("research_plan")
    if plan is None:
        return ""
    revisions = research_plan.revision_lines(plan)
    return ('<section id="research-plan"><h2>The research plan</h2>'
            f"<p>{escape(research_plan.INTRO)}</p>"
            + _nested(research_plan.lines(plan), "")
            + ("<p>Replanned (each version supersedes the one before):</p>"
               + _li([escape(line) for line in revisions], "") if revisions else "")
            + "</section>")


def _tree(doc: dict[str, Any]) -> str:
    items = []
    for h in doc["hypotheses"]:
        pad = f' style="margin-left:{h["depth"] * 20}px"'
        if h["private"]:
            items.append(f"<li{pad}>{escape(words.label(h))}: "
                         f"{escape(words.state_words(h))}</li>")
        else:
            items.append(f"<li{pad}>Hypothesis <strong>{escape(h['hypothesis_id'])}</strong>: "
                         f"{escape(h['title'])} (family {escape(h['mechanism_family'])}, "
                         f"proposed by {escape(h['proposed_by'])}); "
                         f"{escape(words.state_words(h))} "
                         f'(<a href="#{anchor(h)}">evidence</a>)</li>')
    return ("<section><h2>What was tried</h2><p>Each line is a hypothesis: an idea under test, "
            "not a result. Refinements sit under the hypothesis they refine.</p>"
            '<ul class="tree" style="list-style:none;padding-left:0">'
            + ("".join(items) or "<li>No hypotheses yet.</li>") + "</ul></section>")


def _evidence(doc: dict[str, Any]) -> str:
    parts = ['<section id="evidence"><h2>Evidence</h2>']
    for h in doc["hypotheses"]:
        parts.append(f'<h3 id="{anchor(h)}">{escape(words.label(h))}</h3>')
        if h["private"]:
            parts.append(f'<p>Record <span class="id">{h["record_id"]}</span> is private; its '
                         "evidence is not published.</p>")
            continue
        parts.append(f'<p class="full-title">{escape(h["title"])}</p>')
        lines = [escape(line) for line in words.evidence_lines(h)]
        parts.append(_li(lines, ""))
    return "".join(parts) + "</section>"


def _outcomes(doc: dict[str, Any]) -> str:
    promoted = []
    for item in doc["promoted"]:
        tests = item["heldout_tests"] or ([item["heldout"]] if item["heldout"] else [])
        sub = [escape(words.judgement_line(j)) for j in [*tests, item["dev"]] if j]
        sub.append(escape(words.decision_line(item["decision"]) or "no decision"))
        title = "" if item["private"] else f": {escape(item['title'])}"
        promoted.append(f"<strong>{escape(words.label(item))}</strong>{title}"
                        + _li(sub, ""))
    retired = []
    for item in doc["retired"]:
        basis = [escape(words.judgement_line(j))
                 for j in (item["decision"] or {}).get("basis", [])]
        retired.append(f"<strong>{escape(words.label(item))}</strong>"
                       + ("" if item["private"] else f": {escape(item['title'])}")
                       + f" ({escape(words.decision_line(item['decision']) or 'no decision')})"
                       + (_li(basis, "") if basis else ""))
    return ('<section id="promoted"><h2>What was promoted, and why</h2>'
            + _li(promoted, "Nothing has been promoted.") + "</section>"
            f'<section id="retired"><h2>What was retired, and why</h2>'
            f"<p>{escape(words.RETIRED_INTRO)}</p>"
            + _li(retired, "Nothing has been retired.") + "</section>")


def _findings(doc: dict[str, Any]) -> str:
    parts = ["<section><h2>Findings</h2>"]
    for group, title in words.GROUP_WORDS.items():
        items = doc["findings"].get(group, [])
        if not items:
            continue
        lines = [f"A private {f['kind'].replace('_', ' ')} "
                 f'(<span class="id">{f["record_id"]}</span>)' if f["private"] else
                 f"{f['kind'].replace('_', ' ').capitalize()} {escape(f['finding_id'])}: "
                 f"{escape(f['statement'])} "
                 f'(<span class="id">{f["record_id"]}</span>)' for f in items]
        parts.append(f"<h3>{escape(title)}</h3>" + _li(lines, ""))
    if len(parts) == 1:
        parts.append("<p>No findings recorded.</p>")
    return "".join(parts) + "</section>"


def _risks(doc: dict[str, Any]) -> str:
    return ('<section id="risks"><h2>Open risks</h2>'
            + _li([escape(words.risk_line(r)) for r in doc["risks"]], "None recorded.")
            + "</section>")


def _card(kind: str, c: dict[str, Any], legend: Legend) -> str:
    title = "private hypothesis" if c["private"] else c["title"]
    meta = [words.label(c), words.state_words(c)]
    heldout = c.get("heldout")
    if heldout and not heldout["private"] and heldout["mean_delta"] is not None:
        against = words.baseline_words(heldout)
        meta.append(f"held-out {heldout['verdict']}: mean change "
                    f"{signed(heldout['mean_delta'])}" + (f" against the {against}"
                                                          if against else ""))
        if heldout["control"]:
            meta.append(f"p = {number(heldout['p_value'])}, adjusted p "
                        f"{number(heldout['control']['adjusted_p'])} under "
                        f"{heldout['control']['rule']} at level "
                        f"{number(heldout['control']['level'])}")
    if kind == "retirement" and c.get("reasons"):
        meta += ["why: " + line for depth, line in words.why_lines(c["reasons"],
                                                                    c.get("why") or {})
                 if depth == 0]
    if kind == "retry":
        meta.append(f"{c['attempts_left']} attempt(s) left")
    if kind == "next":
        meta = [words.label(c), words.state_words(c), "next: " + board.action_words(c)]
        if c["detail"]:
            meta.append(f"why: {c['detail']}")
    else:
        meta.append(f"rests on {len(c['rests_on'])} record(s)")
    return _card_link(c, title, meta, legend)


def _card_link(c: dict[str, Any], title: str, meta: list[str], legend: Legend) -> str:
    """A card: its edge in its state's colour (noted in ``legend``), the full title on hover."""
    key = legend.use(card_key(c["state"]))
    hover = f"{words.label(c)}: {title} ({words.state_words(c)})"
    return (f'<a class="card" href="#{anchor(c)}" data-hypothesis="{escape(words.label(c))}" '
            f'data-state="{escape(c["state"])}" style="border-left-color:{key.stroke}" '
            f'title="{escape(hover)}"><span class="title">{escape(title)}</span>'
            + "".join(f'<span class="meta">{escape(m)}</span>' for m in meta) + "</a>")


# The board's columns: what is worth merging (promoted, or a candidate awaiting its decision),
# what was or is to be retired (negative results of every kind, kept as evidence), what needs
# another executor turn, and who acts next on every live hypothesis (the frontier's next
# action). Every hypothesis with a decision or a candidacy is in one of the first three.
COLUMNS = (("promotion", "Worth merging", "promoted, or every gate passed and awaiting a decision"),
           ("retirement", "Retired, or to retire", "worse than the baseline, no effect found, "
                                                   "invalid or repeated: negative results, "
                                                   "kept as evidence"),
           ("retry", "Needs another turn", "another bounded dev attempt: the last one failed "
                                           "or found nothing yet"),
           ("next", "Next actions", "each live hypothesis' next action and the role that "
                                    "takes it, from the frontier"))


def _columns(doc: dict[str, Any]) -> str:
    decided = {"promotion": doc["promoted"], "retirement": doc["retired"], "retry": [],
               "next": []}
    found = {**doc["candidates"], "next": doc.get("next_actions", [])}
    legend = Legend("cards")
    parts = ['<section id="candidates"><h2>Candidates</h2><div class="columns">']
    for kind, title, meaning in COLUMNS:
        items = decided[kind] + found[kind]
        if kind == "next" and doc["campaign"]["state"] in board.TERMINAL:
            meaning += (f"; the campaign is {doc['campaign']['state']}, so no role but the "
                        "narrator takes work now")
        elif kind == "next" and doc["campaign"]["state"] == "paused":
            meaning += ("; the campaign is paused, so no role takes work until the owner "
                        "resumes it")
        cards = "".join(_card(kind, c, legend) for c in items)
        parts.append(f'<div class="column {kind}" id="{kind}-candidates" data-column="{kind}">'
                     f"<h2>{title}</h2><p class=\"meaning\">{escape(meaning)}</p>"
                     + board.more_line(doc, kind)
                     + (cards or '<p class="empty">None.</p>') + "</div>")
    return ("".join(parts) + "</div>"
            + legend.html("Each card's left edge is its hypothesis' state:") + "</section>")


def _frontier(doc: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{escape(words.label(h))}</td><td>{escape(h['state'])}</td>"
        f"<td>{escape(', '.join(f'{g} {s}' for g, s in h['gates'].items()) or '-')}</td></tr>"
        for h in doc["hypotheses"])
    return ('<section id="frontier"><h2>The frontier</h2><div class="scroll"><table>'
            "<tr><th>hypothesis</th><th>state</th><th>required gates</th></tr>"
            + (rows or '<tr><td colspan="3">No hypotheses yet.</td></tr>')
            + "</table></div></section>")


def _graph(doc: dict[str, Any], graph: dict[str, Any]) -> str:
    node_of = {n["record_id"]: n["id"] for n in graph["nodes"] if n["kind"] == "hypothesis"}
    rows = [{"node": node_of[h["key"]], "parent_node": node_of.get(h["parent"] or ""),
             "depth": h["depth"], "state": h["state"], "state_words": words.state_words(h),
             "href": anchor(h)} for h in doc["hypotheses"]]
    names = {node_of[h["key"]]: words.label(h) + ("" if h["private"] else f": {h['title']}")
             for h in doc["hypotheses"]}
    legend = Legend("graph")
    picture = svg.render(graph, rows, names, legend)
    return ('<section id="graph"><h2>The evidence graph</h2><p>Each box is a hypothesis '
            "(its border colour is its state; hover for its full name, click for its "
            "evidence); each mark beside it a record about it, in log order.</p>"
            f'<div class="scroll">{picture}</div>' + legend.html("Key:") + "</section>")


def render_story(doc: dict[str, Any]) -> str:
    """The case story as one self-contained HTML page."""
    return _page(doc["first_screen"]["title"], [
        _first_screen(doc), _question(doc), _disclosure(doc), _plan(doc), _research_plan(doc),
        _tree(doc),
        _evidence(doc), _outcomes(doc), _columns(doc), _findings(doc), _risks(doc)])


def render_board(doc: dict[str, Any], graph: dict[str, Any], head: str | None = None) -> str:
    """The board: the first screen, the campaign's state, the candidate and next-action
    columns, a metric chart per hypothesis, the todos, the disclosure, the analysis plan, the
    research plan (when one was recorded), the graph picture, the frontier and the evidence each
    card links to. Lists longer than ``board.LIMIT`` are cut, saying so. ``head`` replaces the
    page's script-free policy (a served board's own head)."""
    cut = board.bounded(doc)  # long lists cut, each saying so and where the rest are
    return _page(doc["first_screen"]["title"], [
        _first_screen(doc), board.status(doc), _columns(cut),
        board.noted(chart.section(cut.get("charts")), cut, "charts"), board.todo_section(doc),
        _disclosure(doc), _plan(doc), _research_plan(doc),
        board.noted(_graph({**cut, "hypotheses": cut["graph_hypotheses"]}, graph), cut, "graph"),
        _frontier(doc), board.noted(_outcomes(cut), cut, "outcomes"),
        board.noted(_evidence({**cut, "hypotheses": cut["evidence_hypotheses"]}), cut,
                    "evidence"), _risks(doc)], head)
