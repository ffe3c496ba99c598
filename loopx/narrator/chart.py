"""A metric-over-time chart per hypothesis, as inline SVG: every value of the contract's metric
it has, one mark per seed, per split, in log order (one column per evidence packet), against
the baseline: the assumed scalar as a labelled dashed line, or the measured baseline's own
values as hollow marks in their place in the log. A value no judgement counts (claimed
evidence, a seed outside its plan's, a packet missing one of them) is drawn grey, its hover
title saying why.

Only recorded numbers are printed (the lowest and highest value drawn, the assumed baseline);
the axes carry no invented ticks. Every mark has a hover title naming its packet.
"""

from __future__ import annotations

from html import escape
from typing import Any

from loopx.narrator import words
from loopx.narrator.legend import ATTEMPT_GREY, INK, WHITE, Key, Legend, glyph
from loopx.narrator.reader import number

W, H, LEFT, RIGHT, TOP, BOTTOM = 360, 180, 56, 12, 14, 26
SPLITS = {"dev": ("circle", "#0969da"), "heldout": ("square", "#bf3989"),
          "train": ("triangle", "#953800")}
ASSUMED = Key("dashed", INK, "none", f"assumed baseline ({words.ASSUMED})")
NO_VALUE = Key("cross", ATTEMPT_GREY, "none", "an attempt without a value (failed, timed out, "
                                              "invalid or cancelled)")


def uncounted_key(split: str) -> Key:
    """A value no judgement counts (claimed, another seed, a partial packet): grey, filled."""
    shape, _ = SPLITS.get(split, ("diamond", "#6e7781"))
    name = words.SPLIT_NAMES.get(split, split).lower()
    return Key(shape, ATTEMPT_GREY, ATTEMPT_GREY,
               f"{name} value no judgement counts (its hover says why)")


def value_key(split: str) -> Key:
    """A hypothesis' value on ``split``: one mark per seed."""
    shape, colour = SPLITS.get(split, ("diamond", "#6e7781"))
    name = words.SPLIT_NAMES.get(split, split).lower()
    return Key(shape, colour, colour, f"{name} value, one mark per seed")


def baseline_key(split: str) -> Key:
    """The measured baseline's value on ``split``: hollow, in the split's shape."""
    shape, _ = SPLITS.get(split, ("diamond", "#6e7781"))
    name = words.SPLIT_NAMES.get(split, split).lower()
    return Key(shape, INK, WHITE, f"measured baseline, {name} value")


def point_words(whose: str, packet: dict[str, Any], v: dict[str, Any]) -> str:
    """One charted value: whose, which split, attempt and seed, the value and its packet."""
    split = words.SPLIT_NAMES.get(v["split"], v["split"]).lower()
    return (f"{whose}: {split} value {number(v['value'])}, seed {v['seed']}, "
            f"attempt {packet['attempt']} ({packet['packet_id']}, seq {packet['seq']})")


def _columns(item: dict[str, Any], baseline: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(whose, packet) in log order: the hypothesis' packets and the measured baseline's."""
    mine = [("hypothesis", p) for p in item["packets"]]
    theirs = [("baseline", p) for p in baseline.get("packets", [])]
    return sorted(mine + theirs, key=lambda c: c[1]["seq"])


def render(item: dict[str, Any], charts: dict[str, Any], legend: Legend) -> str:
    """The chart of one hypothesis (an entry of ``charts["hypotheses"]``)."""
    baseline = charts["baseline"]
    columns = _columns(item, baseline)
    assumed = baseline["value"] if baseline["kind"] == "assumed" else None
    drawn = [v["value"] for _, p in columns for v in p["values"]]
    span = drawn + ([assumed] if assumed is not None else [])
    lo, hi = (min(span), max(span)) if span else (0.0, 1.0)
    pad = (hi - lo) * 0.12 or (abs(hi) * 0.01 or 0.5)
    bottom, top = lo - pad, hi + pad
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def y_of(value: float) -> float:
        return round(TOP + (top - value) / (top - bottom) * plot_h, 1)

    label = str(item["hypothesis_id"])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
             f'data-hypothesis="{escape(label)}" width="{W}" height="{H}" '
             f'viewBox="0 0 {W} {H}" aria-label="{escape(charts["metric"])} of '
             f'{escape(label)} per seed, in log order">',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#f6f8fa" '
             'stroke="#d0d7de" class="frame"/>']
    # The lowest and highest value drawn, labelled at their ticks (pulled apart when close).
    ends = sorted({min(drawn), max(drawn)}) if drawn else []
    ticks = [y_of(v) for v in ends]
    if len(ticks) == 2 and ticks[0] - ticks[1] < 13:
        middle = (ticks[0] + ticks[1]) / 2
        labels = [middle + 6.5, middle - 6.5]
    else:
        labels = ticks
    for value, y, at in zip(ends, ticks, labels, strict=True):
        which = "lowest" if value == min(drawn) else "highest"
        parts.append(f'<path d="M{LEFT - 4} {y} H{LEFT}" stroke="#57606a" class="frame"/>'
                     f'<text x="{LEFT - 6}" y="{at + 4:g}" font-size="11" text-anchor="end" '
                     f'fill="#57606a">{number(value)}<title>the {which} value drawn: '
                     f"{number(value)}</title></text>")
    if assumed is not None:
        key = legend.use(ASSUMED)
        y = y_of(assumed)
        text = f"assumed baseline {number(assumed)}"
        parts.append(f'<path d="M{LEFT} {y} H{W - RIGHT}" stroke="{key.stroke}" fill="none" '
                     'stroke-width="1.6" stroke-dasharray="5 3" class="mark" data-shape="dashed" '
                     f'data-kind="assumed"><title>{escape(text)} ({escape(words.ASSUMED)})'
                     "</title></path>"
                     f'<text x="{W - RIGHT - 4}" y="{y - 4 if y > TOP + 16 else y + 13}" '
                     f'font-size="11" text-anchor="end" fill="{INK}">{escape(text)}</text>')
    if not columns:
        parts.append(f'<text x="{LEFT + plot_w / 2}" y="{TOP + plot_h / 2}" font-size="12" '
                     'text-anchor="middle" fill="#57606a">no attempts yet</text>')
    step = plot_w / max(len(columns), 1)
    for i, (whose, packet) in enumerate(columns):
        x = LEFT + (i + 0.5) * step
        if not packet["values"]:
            title = f"{label}: attempt {packet['attempt']} {packet['status']}, no value " \
                    f"({packet['packet_id']}, seq {packet['seq']})"
            parts.append(glyph(legend.use(NO_VALUE), x, TOP + plot_h - 8, 8.0, title=title,
                               extra=' data-kind="no-value"'))
            continue
        n = len(packet["values"])
        spread = min(5.0, step * 0.6 / max(n, 1))
        for k, v in enumerate(packet["values"]):
            who = label if whose == "hypothesis" else \
                f"measured baseline {baseline.get('hypothesis_id', '')}"
            title = point_words(who, packet, v)
            if v.get("uncounted"):
                key, kind = uncounted_key(v["split"]), "uncounted"
                title += "; not counted: " + words.uncounted_words(v["uncounted"], v["seed"])
            elif whose == "hypothesis":
                key, kind = value_key(v["split"]), "value"
            else:
                key, kind = baseline_key(v["split"]), "baseline"
            parts.append(glyph(legend.use(key), round(x + (k - (n - 1) / 2) * spread, 1),
                               y_of(v["value"]), 8.0, title=title,
                               extra=f' data-kind="{kind}"'))
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{H - 8}" font-size="11" '
                 'text-anchor="middle" fill="#57606a">evidence packets in log order \u2192</text>')
    return "".join(parts) + "</svg>"


def section(charts: dict[str, Any] | None) -> str:
    """The charts of every public hypothesis, with one legend for all of them."""
    head = ('<section id="charts"><h2>The metric over time</h2>')
    if charts is None:
        return head + "<p>No public contract: no metric to chart.</p></section>"
    legend = Legend("charts")
    figures = []
    for item in charts["hypotheses"]:
        label = str(item["hypothesis_id"])
        svg = render(item, charts, legend)
        values = sum(len(p["values"]) for p in item["packets"])
        grey = sum(1 for p in item["packets"] for v in p["values"] if v.get("uncounted"))
        hidden = (f"; {item['hidden']} private attempt(s) not drawn" if item["hidden"] else "")
        caption = (f"{label}: {item['title']}", f"{words.state_words(item)}; "
                   f"{values} value(s) from {len(item['packets'])} evidence packet(s)"
                   f"{f', {grey} of them counted by no judgement' if grey else ''}{hidden}")
        figures.append(f'<figure class="chart" title="{escape(caption[0])}">'
                       f'<figcaption><strong>{escape(caption[0])}</strong>'
                       f'<span class="meta">{escape(caption[1])}</span></figcaption>'
                       f"{svg}</figure>")
    baseline = charts["baseline"]
    if baseline["kind"] == "assumed":
        against = (f"against the assumed baseline {number(baseline['value'])} "
                   f"({words.ASSUMED}), drawn as a dashed line")
    elif baseline["private"]:
        against = "against a baseline measured by a private hypothesis, not drawn"
    else:
        against = (f"against the baseline measured by hypothesis {baseline['hypothesis_id']}, "
                   "whose own values are the hollow marks, in their place in the log")
    direction = "higher" if charts["direction"] == "maximize" else "lower"
    intro = (f"<p>Each hypothesis' {escape(charts['metric'])} ({direction} is better), one mark "
             f"per seed and split, one column per evidence packet in log order, "
             f"{escape(against)}. Hover a mark for its seed, attempt and packet.</p>")
    if not figures:
        return head + intro + "<p>No public hypotheses yet.</p></section>"
    return (head + intro + legend.html("Marks:") + '<div class="charts">' + "".join(figures)
            + "</div></section>")
