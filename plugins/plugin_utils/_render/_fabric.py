# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fabric test's rows for every format and its picture for the HTML: the rounds, left to right, each group a box.

Reads the report's ``fabric`` section (plugin_utils/_fleet/fabric.py section()); computes nothing.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import GROUP_BELOW, GROUP_INCOMPLETE, GROUP_PASSED, GROUP_UNJUDGED
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._svg import esc
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import plural

# A group's verdict (_status.GROUP_*) -> its colour in the picture and its word in the tables.
VERDICT_COLOURS = {GROUP_PASSED: "#2e7d32", GROUP_BELOW: "#c62828", GROUP_INCOMPLETE: "#ef6c00", GROUP_UNJUDGED: "#90a4ae"}
VERDICT_WORDS = {GROUP_PASSED: GROUP_PASSED, GROUP_BELOW: "below its floor", GROUP_INCOMPLETE: "did not finish", GROUP_UNJUDGED: "not judged"}
ROW_H = 30
LABEL_W = 90
BOX_W = 60  # per member
GAP = 8
MAX_PICTURE_W = 1400


def section(report: Mapping[str, Any]) -> Mapping[str, Any]:
    return report.get("fabric") or {}


def gbps(value: Any) -> str:
    return "-" if value is None else "%.3g GB/s" % value


def line(report: Mapping[str, Any]) -> Optional[str]:
    """One sentence: rounds, what was isolated, links, hosts in ERROR; None without a fabric test."""
    fabric = section(report)
    if not fabric:
        return None
    parts = ["%s (%s), %s" % (plural(fabric["round_count"], "round"), fabric["mode"], plural(len(fabric["hosts"]), "host"))]
    if fabric["isolated"]:
        parts.append("isolated %s" % "; ".join("%s (%s)" % (item["host"], item["proof"]) for item in fabric["isolated"]))
    if fabric["links"]:
        parts.append("slow %s %s" % ("link" if len(fabric["links"]) == 1 else "links",
                                     ", ".join("%s-%s" % tuple(link["hosts"]) for link in fabric["links"])))
    if fabric["errors"]:
        parts.append("ERROR: %s" % ", ".join("%s (%s)" % (e["host"], e["kind"]) for e in fabric["errors"]))
    if not fabric["isolated"] and not fabric["links"] and not fabric["errors"]:
        parts.append("%d of %d proven good" % (len(fabric["good"]), len(fabric["hosts"])))
    if fabric.get("busy"):
        parts.append("not tested, busy: %s" % ", ".join(item["host"] for item in fabric["busy"]))
    if fabric.get("note"):
        parts.append(fabric["note"])
    return "Fabric: " + "; ".join(parts)


def has_problems(report: Mapping[str, Any]) -> bool:
    fabric = section(report)
    return bool(fabric.get("isolated") or fabric.get("links") or fabric.get("errors"))


def round_rows(report: Mapping[str, Any]) -> list[tuple[int, str, str, str, str, str, str, str]]:
    """(round, stage, group, purpose, members, bus bandwidth, floor, verdict) per group of every round."""
    rows = []
    for entry in section(report).get("rounds") or []:
        for group in entry["groups"]:
            verdict = VERDICT_WORDS.get(group["verdict"], group["verdict"])
            if group["verdict"] == GROUP_INCOMPLETE and group.get("reason"):
                verdict = "%s: %s" % (verdict, group["reason"])
            rows.append((entry["round"], entry["stage"], group["id"], group["purpose"], ", ".join(group["members"]),
                         gbps(group.get("busbw_gbps")), gbps(group.get("floor_gbps")), verdict))
    return rows


def isolated_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(host, rounds, proof) per isolated host."""
    return [(item["host"], ", ".join(str(r) for r in item["rounds"]), item["proof"]) for item in section(report).get("isolated") or []]


def picture(report: Mapping[str, Any]) -> str:
    """The rounds as an SVG: a row per round, a box per group (width by members, colour by verdict), isolated hosts
    in bold red, each box's tooltip its members, figure and floor."""
    fabric = section(report)
    rounds = fabric.get("rounds") or []
    if not rounds:
        return ""
    isolated = {item["host"] for item in fabric.get("isolated") or []}
    widest = max(sum(len(g["members"]) * BOX_W + GAP for g in entry["groups"]) for entry in rounds)
    scale = min(1.0, (MAX_PICTURE_W - LABEL_W) / float(widest or 1))
    width = LABEL_W + int(widest * scale) + 10
    height = ROW_H * len(rounds) + 34
    out = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart fabric" role="img" aria-label="Fabric test rounds" '
           'width="%d" height="%d" viewBox="0 0 %d %d">' % (width, height, width, height)]
    for row, entry in enumerate(rounds):
        y = row * ROW_H + 4
        out.append('<text x="4" y="%d" class="lbl-left">round %d %s</text>' % (y + 16, entry["round"], esc(entry["stage"])))
        x = float(LABEL_W)
        for group in entry["groups"]:
            box = len(group["members"]) * BOX_W * scale
            verdict = VERDICT_WORDS.get(group["verdict"], group["verdict"])
            tip = "%s %s: %s - %s, floor %s - %s" % (group["id"], group["purpose"], ", ".join(group["members"]),
                                                     gbps(group.get("busbw_gbps")), gbps(group.get("floor_gbps")), verdict)
            out.append('<g class="group" data-group="%s" data-verdict="%s"><title>%s</title>' % (
                esc(group["id"]), esc(group["verdict"]), esc(tip)))
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" rx="3" fill="%s" fill-opacity="0.25" stroke="%s"/>' % (
                x, y, box, ROW_H - 8, VERDICT_COLOURS.get(group["verdict"], "#777"), VERDICT_COLOURS.get(group["verdict"], "#777")))
            member_w = box / max(len(group["members"]), 1)
            for index, member in enumerate(group["members"]):
                bad = member in isolated and group["verdict"] == GROUP_BELOW
                out.append('<text x="%.1f" y="%d" class="member%s" data-host="%s" text-anchor="middle">%s</text>' % (
                    x + member_w * (index + 0.5), y + 15, " isolated" if bad else "", esc(member), esc(_short(member))))
            out.append("</g>")
            x += box + GAP * scale
    legend = LABEL_W
    for verdict, colour in VERDICT_COLOURS.items():
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="leg">%s</text>' % (
            legend, height - 14, colour, legend + 14, height - 5, esc(VERDICT_WORDS[verdict])))
        legend += 130
    out.append("</svg>")
    return "".join(out)


def _short(name: str) -> str:
    return name if len(name) <= 9 else name[:8] + "\u2026"
