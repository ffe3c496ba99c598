"""A picture of the evidence graph as inline SVG: the hypothesis tree (refinements and
supersessions), and beside each hypothesis a dot per record of its evidence (attempts,
judgements, audits, gate checks, decisions), coloured by kind and outcome.

The layout is a pure function of the graph export: one row per hypothesis in tree order,
indented by depth, so the same log draws the same picture.
"""

from __future__ import annotations

from html import escape
from typing import Any

ROW, INDENT, BOX_W, BOX_H, DOT = 34, 22, 250, 24, 12
STATE_COLOURS = {
    "promoted": "#1a7f37", "retired": "#8c959f", "contradicted": "#cf222e",
    "at_promotion_gate": "#bf8700", "supported": "#2da44e", "needs_retry": "#d4a72c",
    "no_effect_found": "#57606a", "retry_exhausted": "#9a6700", "baseline": "#24292f",
}
DEFAULT_COLOUR = "#0969da"
# (edge type into the hypothesis, node kind) -> what the dot says and its colour.
DOTS = {
    "packet": ("attempt", "#6e7781"), "evidence_event": ("judgement", "#0969da"),
    "novelty_audit": ("novelty audit", "#8250df"), "gate_result": ("gate check", "#bf8700"),
    "decision": ("decision", "#1a7f37"),
}
EVIDENCE_EDGES = ("attempt_of", "judgement_of", "audits", "checks", "decides")


def _dots(graph: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    kinds = {n["id"]: n for n in graph["nodes"]}
    out: dict[str, list[dict[str, Any]]] = {}
    for edge in graph["edges"]:
        if edge["type"] in EVIDENCE_EDGES and edge["source"] in kinds:
            out.setdefault(edge["target"], []).append(kinds[edge["source"]])
    for items in out.values():
        items.sort(key=lambda n: n["seq"])
    return out


def _colour(node: dict[str, Any]) -> str:
    if node["kind"] == "evidence_event":
        return {"supports": "#1a7f37", "contradicts": "#cf222e"}.get(node.get("verdict"),
                                                                      "#0969da")
    if node["kind"] == "decision" and node.get("outcome") == "retired":
        return "#8c959f"
    return DOTS[node["kind"]][1]


def render(graph: dict[str, Any], rows: list[dict[str, Any]], names: dict[str, str]) -> str:
    """The SVG for ``rows`` (the story's hypotheses in tree order); ``names`` maps a hypothesis
    node id to the label to print (already public-safe)."""
    dots = _dots(graph)
    width = 40 + max([h["depth"] for h in rows] + [0]) * INDENT + BOX_W + 30 * DOT + 40
    height = 30 + ROW * max(len(rows), 1) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="graph" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'aria-label="Evidence graph: hypotheses and the records about them">']
    where: dict[str, tuple[int, int]] = {}
    for i, h in enumerate(rows):
        where[h["node"]] = (20 + h["depth"] * INDENT, 20 + i * ROW)
    for h in rows:
        if h["parent_node"] in where:
            px, py = where[h["parent_node"]]
            x, y = where[h["node"]]
            parts.append(f'<path d="M{px + 8} {py + BOX_H} V{y + BOX_H // 2} H{x}" '
                         'fill="none" stroke="#8c959f" stroke-width="1.5"/>')
    for h in rows:
        x, y = where[h["node"]]
        colour = STATE_COLOURS.get(h["state"], DEFAULT_COLOUR)
        label = names.get(h["node"], h["node"])
        short = label if len(label) <= 34 else label[:33] + "\u2026"
        parts.append(f'<g class="node" data-state="{escape(h["state"])}">'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="5" '
                     f'fill="#ffffff" stroke="{colour}" stroke-width="2"/>'
                     f'<text x="{x + 8}" y="{y + 16}" font-size="12">{escape(short)}</text>'
                     f'<title>{escape(label)}: {escape(h["state"])}</title></g>')
        for j, node in enumerate(dots.get(h["node"], [])[:30]):
            cx = x + BOX_W + 14 + j * DOT
            what = DOTS[node["kind"]][0]
            detail = node.get("verdict") or node.get("outcome") or node.get("status") or ""
            parts.append(f'<circle cx="{cx}" cy="{y + BOX_H // 2}" r="4.5" '
                         f'fill="{_colour(node)}"><title>{escape(what)} {escape(str(detail))} '
                         f'(seq {node["seq"]})</title></circle>')
    legend_y = height - 18
    x = 20
    for what, colour in DOTS.values():
        parts.append(f'<circle cx="{x}" cy="{legend_y}" r="4.5" fill="{colour}"/>'
                     f'<text x="{x + 8}" y="{legend_y + 4}" font-size="11">{what}</text>')
        x += 24 + 7 * len(what)
    parts.append("</svg>")
    return "".join(parts)
