# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Inline SVG charts of the HTML report: status by class, and each benchmark's distribution per class.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERRORED, FAILED, HEALTHY, MISSING, TASK_FAILED, UNCHECKED, UNREACHABLE, WARNING
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import printable

STATUS_COLOURS = {HEALTHY: "#2e7d32", WARNING: "#f9a825", UNCHECKED: "#90a4ae", ERRORED: "#ef6c00",
                  FAILED: "#c62828", UNREACHABLE: "#6a1b9a", TASK_FAILED: "#4e342e", MISSING: "#546e7a"}
LABEL_W = 370
BAR_W = 560
ROW_H = 26
# Distribution charts share one axis: the value relative to its class median, slower to the left.
AXIS_MIN, AXIS_MAX = 0.5, 1.5
MAX_DOTS = 60  # a class with more values is drawn as its box only (plus its stragglers)


def esc(text: object) -> str:
    return escape(printable(text, keep="\t\n\r"), quote=True).replace("\r", "&#13;")


def _label(text: str, y: float) -> str:
    short = text if len(text) <= 48 else text[:46] + "\u2026"
    return '<text x="%d" y="%d" class="lbl"><title>%s</title>%s</text>' % (LABEL_W - 8, y, esc(text), esc(short))


def status_by_class(classes: Mapping[str, Mapping[str, Any]], statuses: Iterable[str]) -> str:
    """Stacked horizontal bars: hosts of each class by status."""
    height = ROW_H * len(classes) + 30
    out = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="Hosts by status per class" '
           'width="%d" height="%d" viewBox="0 0 %d %d">' % (LABEL_W + BAR_W + 60, height, LABEL_W + BAR_W + 60, height)]
    for row, (name, info) in enumerate(classes.items()):
        y = row * ROW_H + 4
        total = float(len(info["hosts"])) or 1.0
        out.append(_label(name, y + 15))
        x = float(LABEL_W)
        for status in statuses:
            count = info["status"].get(status, 0)
            if not count:
                continue
            width = BAR_W * count / total
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" data-status="%s"><title>%s: %d %s</title></rect>' % (
                x, y, width, ROW_H - 8, STATUS_COLOURS.get(status, "#777"), esc(status), esc(name), count,
                esc(views.status_label(status))))
            x += width
        out.append('<text x="%d" y="%d" class="num">%d</text>' % (LABEL_W + BAR_W + 6, y + 15, total))
    legend_x = LABEL_W
    for status in statuses:
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="leg">%s</text>' % (
            legend_x, height - 16, STATUS_COLOURS.get(status, "#777"), legend_x + 14, height - 7, esc(views.status_label(status))))
        legend_x += 18 + 7 * len(views.status_label(status))
    out.append("</svg>")
    return "".join(out)


def _x(ratio: float) -> float:
    clamped = min(max(ratio, AXIS_MIN), AXIS_MAX)
    return LABEL_W + BAR_W * (clamped - AXIS_MIN) / (AXIS_MAX - AXIS_MIN)


def _relative(value: float, median: float, lower_better: bool) -> float:
    if lower_better:
        return median / value if value > 0 else AXIS_MIN
    return value / median if median > 0 else AXIS_MAX


def distribution(metric: str, entry: Mapping[str, Any], dots: Mapping[str, Sequence[tuple[str, float]]],
                 slow: Mapping[str, Sequence[tuple[str, str, float]]], rule: Mapping[str, float]) -> str:
    """One benchmark: per class a box (p25-p75), whiskers (p5-p95) and the median at 1.0, on the axis
    value / class median; the class's values as dots when it has few, and its stragglers as red dots.

    dots: {class: [(label, value)]}; slow: {class: [(host, label, value)]}.
    """
    lower_better = entry["lower_is_better"]
    classes = entry["classes"]
    height = ROW_H * len(classes) + 44
    width = LABEL_W + BAR_W + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="%s by class" data-metric="%s" '
           'width="%d" height="%d" viewBox="0 0 %d %d">' % (esc(metric), esc(metric), width, height, width, height)]
    for ratio, css in ((rule["ratio_floor"], "floor"), (1.0 - rule["min_shortfall"], "shortfall"), (1.0, "median")):
        out.append('<line x1="%.1f" x2="%.1f" y1="0" y2="%d" class="%s"/>' % (_x(ratio), _x(ratio), height - 30, css))
    for row, (name, dist) in enumerate(classes.items()):
        y = row * ROW_H + 4
        mid = y + (ROW_H - 8) / 2.0
        median = dist["median"]
        # For a lower-is-better metric the 95th percentile is the slow end: sorting puts it on the left.
        low05, low25, high75, high95 = sorted(_relative(dist[k], median, lower_better) for k in ("p05", "p25", "p75", "p95"))
        out.append(_label(name, y + 15))
        out.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="whisker"/>' % (_x(low05), _x(high95), mid, mid))
        out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" class="box"><title>%s, %s: median %s, n=%d</title></rect>' % (
            _x(low25), y, max(_x(high75) - _x(low25), 1.0), ROW_H - 8, esc(name), esc(metric), esc(views.number(median)), dist["n"]))
        for label, value in dots.get(name, ()):
            out.append('<circle cx="%.1f" cy="%.1f" r="2.5" class="dot"><title>%s: %s</title></circle>' % (
                _x(_relative(value, median, lower_better)), mid, esc(label), esc(views.number(value))))
        for host, label, value in slow.get(name, ()):
            ratio = _relative(value, median, lower_better)
            out.append('<circle cx="%.1f" cy="%.1f" r="4.5" class="straggler" data-host="%s"><title>%s: %s (%s)</title></circle>' % (
                _x(ratio), mid, esc(host), esc(label), esc(views.number(value)), esc(views.percent_change(ratio))))
    axis_y = height - 24
    out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" class="axis"/>' % (LABEL_W, LABEL_W + BAR_W, axis_y, axis_y))
    for tick in (0.5, 0.75, 1.0, 1.25, 1.5):
        out.append('<text x="%.1f" y="%d" class="tick">%s</text>' % (_x(tick), axis_y + 14, "%.2g\u00d7" % tick))
    out.append('<text x="%d" y="%d" class="lbl">value / class median, left is slower</text>' % (LABEL_W - 30, axis_y + 14))
    out.append("</svg>")
    return "".join(out)


TIMELINE_BAR_W = 28
TIMELINE_LEFT = 84


def findings_timeline(runs: Sequence[tuple[str, int, int, int]]) -> str:
    """Findings per run, oldest left: opened (red, up) and closed since the run before (green, down) as bars around a
    middle line; below them, the findings open after each run as a line. runs: views.findings_timeline()."""
    top = max([max(r[1], r[2]) for r in runs] + [1])
    most_open = max([r[3] for r in runs] + [1])
    half, band = 36.0, 30.0  # px: the largest bar on each side of the middle line; the band of the open line
    width = TIMELINE_LEFT + 10 + TIMELINE_BAR_W * max(len(runs), 8)  # room for the two dates under a few runs
    middle = half + 4
    band_top = middle + half + 8
    height = int(band_top + band + 18)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="Findings opened and closed per run" '
           'data-runs="%d" width="%d" height="%d" viewBox="0 0 %d %d">' % (len(runs), width, height, width, height)]
    out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="axis"/>' % (TIMELINE_LEFT, width - 6, middle, middle))
    points = []
    for n, (at, opened, closed, still) in enumerate(runs):
        x = TIMELINE_LEFT + 4 + n * TIMELINE_BAR_W
        up, down = half * opened / top, half * closed / top
        tip = "%s: %d opened, %d closed, %d open" % (at, opened, closed, still)
        out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" class="opened"><title>%s</title></rect>' % (
            x, middle - up, TIMELINE_BAR_W - 8, up, esc(tip)))
        out.append('<rect x="%d" y="%.1f" width="%d" height="%.1f" class="closed"><title>%s</title></rect>' % (
            x, middle, TIMELINE_BAR_W - 8, down, esc(tip)))
        points.append("%.1f,%.1f" % (x + (TIMELINE_BAR_W - 8) / 2.0, band_top + band - band * still / most_open))
    out.append('<polyline points="%s" class="open"><title>open after each run (at most %d)</title></polyline>' % (
        " ".join(points), most_open))
    for label, y in (("opened %d" % top, middle - half + 10), ("closed", middle + half), ("open %d" % most_open, band_top + 10)):
        out.append('<text x="%d" y="%.1f" class="lbl">%s</text>' % (TIMELINE_LEFT - 6, y, label))
    out.append('<text x="%d" y="%d" class="leg">%s</text><text x="%d" y="%d" class="leg" text-anchor="end">%s</text>' % (
        TIMELINE_LEFT + 4, height - 4, esc(runs[0][0][:10]), width - 6, height - 4, esc(runs[-1][0][:10])))
    out.append("</svg>")
    return "".join(out)
