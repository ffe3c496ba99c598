"""A picture of the evidence graph as inline SVG: the hypothesis tree (a solid line joins a
refinement to its parent, a dashed one a hypothesis to the one it superseded), and beside each
hypothesis a glyph per record of its evidence (attempts, judgements, audits, gate checks,
decisions), its shape the record's kind and its colour the outcome.

The layout is a pure function of the graph export: one row per hypothesis in tree order,
indented by depth, so the same log draws the same picture. Every glyph and line is drawn
through a :class:`~loopx.narrator.legend.Legend`, so the legend beside the picture lists exactly
what it uses.
"""

from __future__ import annotations

from html import escape
from typing import Any

from loopx.narrator.legend import (
    ATTEMPT_GREY,
    BAD,
    GOOD,
    GREY,
    NEUTRAL,
    WHITE,
    Key,
    Legend,
    glyph,
    state_key,
)

ROW, INDENT, BOX_H, DOT, LEFT, MAX_DOTS = 34, 22, 24, 14, 26, 30
# A box fits its label, up to LABEL_CHARS characters; a longer one is cut short on the box and
# given whole in its hover title and in the evidence section the box links to.
LABEL_CHARS, CHAR_W, MIN_BOX_W = 60, 6.9, 200
ATTEMPT = ATTEMPT_GREY
EVIDENCE_EDGES = ("attempt_of", "judgement_of", "audits", "checks", "decides")
VERDICT_COLOURS = {"supports": GOOD, "contradicts": BAD, "inconclusive": NEUTRAL,
                   "needs_retry": "#d4a72c", "invalid": "#8250df"}
REFINES = Key("line", GREY, "none", "refines: a refinement under the hypothesis it refines")
SUPERSEDES = Key("dashed", GREY, "none", "supersedes: joins a hypothesis to the one it replaced")


def record_key(node: dict[str, Any]) -> Key:
    """The glyph of one record about a hypothesis: its kind's shape, its outcome's colour."""
    kind = node["kind"]
    if kind == "packet":
        if node.get("status") == "scored":
            return Key("circle", ATTEMPT, ATTEMPT, "attempt, scored")
        return Key("circle", ATTEMPT, WHITE, "attempt without a score (failed, timed out, "
                                             "invalid or cancelled)")
    if kind == "evidence_event":
        verdict = str(node.get("verdict"))
        return Key("diamond", VERDICT_COLOURS.get(verdict, NEUTRAL),
                   VERDICT_COLOURS.get(verdict, NEUTRAL), f"judgement: {verdict}")
    if kind == "novelty_audit":
        verdict = str(node.get("verdict"))
        colour = {"novel": GOOD, "not_novel": BAD}.get(verdict, NEUTRAL)
        return Key("triangle", colour, colour, f"novelty audit: {verdict.replace('_', ' ')}")
    if kind == "gate_result":
        passed = bool(node.get("passed"))
        colour = GOOD if passed else BAD
        return Key("square", colour, colour, "gate check: " + ("passed" if passed else "failed"))
    outcome = str(node.get("outcome"))
    colour = GOOD if outcome == "promoted" else GREY
    return Key("star", colour, colour, f"decision: {outcome}")


def _records(graph: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    nodes = {n["id"]: n for n in graph["nodes"]}
    out: dict[str, list[dict[str, Any]]] = {}
    for edge in graph["edges"]:
        if edge["type"] in EVIDENCE_EDGES and edge["source"] in nodes:
            out.setdefault(edge["target"], []).append(nodes[edge["source"]])
    for items in out.values():
        items.sort(key=lambda n: n["seq"])
    return out


def _detail(node: dict[str, Any]) -> str:
    if node["kind"] == "packet":
        return f"attempt {node.get('attempt')} {node.get('status')}"
    if node["kind"] == "gate_result":
        return f"{node.get('gate')} gate check " + ("passed" if node.get("passed") else "failed")
    return record_key(node).words


def render(graph: dict[str, Any], rows: list[dict[str, Any]], names: dict[str, str],
           legend: Legend) -> str:
    """The SVG for ``rows`` (the story's hypotheses in tree order: node, parent_node, depth,
    state, state_words, href); ``names`` maps a hypothesis node id to the label to print
    (already public-safe). What it draws is noted in ``legend``."""
    records = _records(graph)
    longest = max([len(names.get(h["node"], h["node"])) for h in rows] + [0])
    box_w = max(MIN_BOX_W, round(16 + CHAR_W * min(longest, LABEL_CHARS)))
    dots = max([min(len(records.get(h["node"], [])), MAX_DOTS) for h in rows] + [0])
    width = LEFT + max([h["depth"] for h in rows] + [0]) * INDENT + box_w + (dots + 4) * DOT
    height = 20 + ROW * max(len(rows), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="graph" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'aria-label="Evidence graph: hypotheses and the records about them">']
    where = {h["node"]: (LEFT + h["depth"] * INDENT, 10 + i * ROW) for i, h in enumerate(rows)}
    for h in rows:
        if h["parent_node"] in where:
            (px, py), (x, y) = where[h["parent_node"]], where[h["node"]]
            key = legend.use(REFINES)
            parts.append(f'<path d="M{px + 8} {py + BOX_H} V{y + BOX_H // 2} H{x}" '
                         f'fill="none" stroke="{key.stroke}" stroke-width="1.6" '
                         f'class="mark edge" data-shape="line"><title>'
                         f'{escape(names.get(h["node"], h["node"]))} refines '
                         f'{escape(names.get(h["parent_node"], h["parent_node"]))}</title></path>')
    for edge in graph["edges"]:
        if edge["type"] == "supersedes" and edge["source"] in where and edge["target"] in where:
            (x1, y1), (x2, y2) = where[edge["source"]], where[edge["target"]]
            key = legend.use(SUPERSEDES)
            parts.append(f'<path d="M{x1} {y1 + BOX_H // 2} H8 V{y2 + BOX_H // 2} H{x2}" '
                         f'fill="none" stroke="{key.stroke}" stroke-width="1.6" '
                         'stroke-dasharray="5 3" class="mark edge" data-shape="dashed"><title>'
                         f'{escape(names.get(edge["source"], edge["source"]))} supersedes '
                         f'{escape(names.get(edge["target"], edge["target"]))}</title></path>')
    for h in rows:
        x, y = where[h["node"]]
        key = legend.use(state_key(h["state"]))
        label = names.get(h["node"], h["node"])
        short = label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "\u2026"
        parts.append(f'<a href="#{escape(h["href"])}"><g class="node" '
                     f'data-state="{escape(h["state"])}">'
                     f'<rect x="{x}" y="{y}" width="{box_w}" height="{BOX_H}" rx="5" '
                     f'fill="{key.fill}" stroke="{key.stroke}" stroke-width="2" class="mark" '
                     f'data-shape="box"/>'
                     f'<text x="{x + 8}" y="{y + 16}" font-size="12" fill="#1f2328">'
                     f'{escape(short)}</text>'
                     f'<title>{escape(label)}: {escape(h["state_words"])}</title></g></a>')
        mine = records.get(h["node"], [])
        for j, node in enumerate(mine[:MAX_DOTS]):
            detail = f"{_detail(node)} (seq {node['seq']})"
            parts.append(glyph(legend.use(record_key(node)), x + box_w + 14 + j * DOT,
                               y + BOX_H / 2, 9.0, title=detail))
        if len(mine) > MAX_DOTS:
            parts.append(f'<text x="{x + box_w + 14 + MAX_DOTS * DOT}" y="{y + 16}" '
                         f'font-size="11" fill="#57606a">+{len(mine) - MAX_DOTS}<title>'
                         f"{len(mine) - MAX_DOTS} more records: see the evidence below"
                         "</title></text>")
    parts.append("</svg>")
    return "".join(parts)
