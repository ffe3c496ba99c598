"""The board's visual vocabulary: one colour per hypothesis state, one glyph (shape and colour)
per kind and outcome of record, line styles for the graph's edges and the charts' baseline,
and the legends that explain them.

Every picture draws through a :class:`Legend`, which remembers each (shape, colour, fill) it
drew and what it means, so a legend lists exactly what its picture uses: no colour without a
key, and no key for a colour that is not there.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

# One colour per frontier state, used for a card's edge and a graph box's border alike.
STATE_COLOURS = {
    "proposed": "#a475f9", "selected": "#54aeff", "running": "#0969da",
    "evidence_recorded": "#bc4c00", "supported": "#1b7c83", "needs_retry": "#d4a72c",
    "at_promotion_gate": "#8250df", "promoted": "#1a7f37", "contradicted": "#cf222e",
    "no_effect_found": "#57606a", "retry_exhausted": "#9a6700", "retired": "#8c959f",
    "baseline": "#24292f",
}
OTHER_STATE = "#6e7781"  # a state this build does not know
GOOD, BAD, NEUTRAL, GREY, INK = "#1a7f37", "#cf222e", "#0969da", "#8c959f", "#24292f"
ATTEMPT_GREY = "#6e7781"
WHITE = "#ffffff"


@dataclass(frozen=True)
class Key:
    """One thing a picture draws: its shape, stroke and fill colours, and what it means."""

    shape: str  # box, card, circle, square, diamond, triangle, star, cross, line, dashed
    stroke: str
    fill: str
    words: str

    @property
    def ident(self) -> tuple[str, str, str]:
        return self.shape, self.stroke, self.fill


def state_name(state: str) -> str:
    """A frontier state's name in words, as the legends give it."""
    return "the measured baseline" if state == "baseline" else state.replace("_", " ")


def state_key(state: str) -> Key:
    """A hypothesis box in its state's colour."""
    return Key("box", STATE_COLOURS.get(state, OTHER_STATE), WHITE, state_name(state))


def card_key(state: str) -> Key:
    """A card's edge in its hypothesis' state's colour."""
    colour = STATE_COLOURS.get(state, OTHER_STATE)
    return Key("card", colour, colour, state_name(state))


def glyph(key: Key, x: float, y: float, size: float = 9.0, title: str | None = None,
          cls: str = "mark", extra: str = "") -> str:
    """``key``'s shape centred on (x, y), ``size`` across, as SVG (with a hover title)."""
    h = size / 2
    paint = (f'stroke="{key.stroke}" fill="{key.fill}" stroke-width="1.6" '
             f'class="{cls}" data-shape="{key.shape}"{extra}')
    tip = f"<title>{escape(title)}</title>" if title else ""
    if key.shape == "circle":
        body = f'<circle cx="{x:g}" cy="{y:g}" r="{h:g}" {paint}>'
        return body + tip + "</circle>"
    if key.shape in ("square", "box", "card"):
        w = size * (2.2 if key.shape == "box" else 1)
        body = (f'<rect x="{x - w / 2:g}" y="{y - h:g}" width="{w:g}" height="{size:g}" '
                f'rx="{1.5 if key.shape != "box" else 3}" {paint}>')
        return body + tip + "</rect>"
    if key.shape in ("line", "dashed"):
        dash = ' stroke-dasharray="5 3"' if key.shape == "dashed" else ""
        return (f'<path d="M{x - size:g} {y:g} H{x + size:g}"{dash} {paint}>'
                + tip + "</path>")
    points = {
        "diamond": [(0, -h * 1.2), (h * 1.2, 0), (0, h * 1.2), (-h * 1.2, 0)],
        "triangle": [(0, -h * 1.15), (h * 1.1, h * 0.9), (-h * 1.1, h * 0.9)],
        "star": [(0, -h * 1.25), (h * 0.35, -h * 0.4), (h * 1.2, -h * 0.35), (h * 0.55, h * 0.2),
                 (h * 0.75, h * 1.1), (0, h * 0.6), (-h * 0.75, h * 1.1), (-h * 0.55, h * 0.2),
                 (-h * 1.2, -h * 0.35), (-h * 0.35, -h * 0.4)],
        "cross": [],
    }[key.shape]
    if key.shape == "cross":
        return (f'<path d="M{x - h:g} {y - h:g} L{x + h:g} {y + h:g} M{x - h:g} {y + h:g} '
                f'L{x + h:g} {y - h:g}" {paint}>' + tip + "</path>")
    shape = " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in points)
    return f'<polygon points="{shape}" {paint}>' + tip + "</polygon>"


class Legend:
    """What one picture (or one group of cards) drew, in the order first drawn."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.keys: dict[tuple[str, str, str], Key] = {}

    def use(self, key: Key) -> Key:
        """Note that ``key`` is drawn; the first words given for a glyph are kept."""
        return self.keys.setdefault(key.ident, key)

    def html(self, intro: str) -> str:
        """The legend: a swatch drawn the same way as in the picture, and its words."""
        if not self.keys:
            return ""
        items = []
        # States first, then lines, then records' glyphs: each group in the order drawn.
        order = {"box": 0, "card": 0, "line": 1, "dashed": 1}
        for key in sorted(self.keys.values(), key=lambda k: order.get(k.shape, 2)):
            if key.shape == "card":
                swatch = (f'<span class="swatch card" data-shape="card" '
                          f'style="border-left-color:{key.stroke}"></span>')
            else:
                width = 30 if key.shape in ("box", "line", "dashed") else 16
                swatch = (f'<svg class="swatch" width="{width}" height="16" '
                          f'viewBox="0 0 {width} 16" aria-hidden="true">'
                          + glyph(key, width / 2, 8, 9.0 if key.shape != "box" else 10.0,
                                  cls="key-mark") + "</svg>")
            items.append(f'<li class="key" title="{escape(key.words)}">{swatch}'
                         f"<span>{escape(key.words)}</span></li>")
        return (f'<div class="legend" data-legend="{escape(self.name)}"><span class="intro">'
                f'{escape(intro)}</span><ul>{"".join(items)}</ul></div>')
