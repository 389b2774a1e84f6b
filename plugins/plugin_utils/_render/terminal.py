# -*- coding: utf-8 -*-
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The concise end-of-play summary of a fleet report, as (text, colour) lines.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Colour names are Ansible's (C.COLOR_*); the callback applies them only where Ansible would colour.
_COLOURS = {"FAIL": "red", "ERROR": "red", "WARN": "yellow", "healthy": "green", "unreachable": "red", "task_failed": "red"}
MAX_HOSTS_SHOWN = 8
MAX_ACTIONS_SHOWN = 5


def _gpu_names(gpus):
    return ", ".join("GPU %s %s" % (g.get("index"), g.get("pci_bus_id") or "") for g in gpus).strip()


def _host_list(names, detail=None):
    shown = [("%s (%s)" % (n, detail[n]) if detail and detail.get(n) else n) for n in names[:MAX_HOSTS_SHOWN]]
    more = len(names) - len(shown)
    return ", ".join(shown) + (" and %d more" % more if more > 0 else "")


def render(report, paths=()):
    """Lines of (text, colour or None)."""
    totals = report["totals"]
    lines = [("", None), ("continuum.hydra fleet report: %d host%s: %d healthy, %d warning, %d failed, %d error, %d unreachable, %d task failed" % (
        totals["hosts"], "" if totals["hosts"] == 1 else "s", totals["healthy"], totals["warning"], totals["failed"], totals["error"], totals["unreachable"],
        totals["task_failed"]), None)]
    for status in ("unreachable", "task_failed"):
        names = [h for h, e in report["hosts"].items() if e["status"] == status]
        if names:
            lines.append(("  %-11s %s" % (status.upper().replace("_", " "), _host_list(names)), _COLOURS[status]))
    for check_id, entries in report["failing"].items():
        for status in ("FAIL", "ERROR"):
            names = [e["host"] for e in entries if e["status"] == status]
            detail = dict((e["host"], _gpu_names(e["gpus"])) for e in entries if e["gpus"])
            if names:
                lines.append(("  %-5s %-28s %s" % (status, check_id, _host_list(names, detail)), _COLOURS[status]))
    if report["actions"]:
        lines.append(("Top actions:", None))
        for rank, action in enumerate(report["actions"][:MAX_ACTIONS_SHOWN], 1):
            lines.append(("  %d. [%s] %s on %d host%s: %s" % (
                rank, action["status"], action["check_id"], action["host_count"], "" if action["host_count"] == 1 else "s",
                action["remediation"] or "see the check's details"), _COLOURS.get(action["status"])))
    elif not totals["unreachable"] and not totals["task_failed"]:
        lines.append(("All hosts healthy.", _COLOURS["healthy"]))
    for path in paths:
        lines.append(("Report: %s" % path, None))
    return lines
