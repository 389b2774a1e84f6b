# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Rows the human-readable formats share (terminal, Markdown, HTML), so they all say the same thing.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

PROBLEM_STATUSES = ("failed", "error", "unreachable", "task_failed")
STATUS_ORDER = ("failed", "error", "unreachable", "task_failed", "warning", "unchecked", "healthy")
STATUS_LABELS = {"task_failed": "task failed"}


def status_label(status):
    return STATUS_LABELS.get(status, status)


def number(value):
    """A figure for people: 4 significant digits, no exponent for ordinary sizes."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        return "%.3g" % value
    return ("%.4g" % value) if abs(value) < 1e4 else "%d" % round(value)


def percent_change(ratio):
    """0.77 -> "-23%" (the ratio of a figure to its class median, direction-adjusted)."""
    if ratio is None:
        return "-"
    return "%+.0f%%" % ((ratio - 1.0) * 100.0)


def gpu_label(gpu):
    parts = ["GPU %s" % gpu.get("index")]
    if gpu.get("pci_bus_id"):
        parts.append(gpu["pci_bus_id"])
    if gpu.get("uuid"):
        parts.append(gpu["uuid"])
    return " ".join(parts)


def analysis(report):
    return report.get("analysis") or {}


def host_rows(report):
    """(host, entry) sorted worst status first, then by name."""
    rank = dict((s, i) for i, s in enumerate(STATUS_ORDER))
    return sorted(report["hosts"].items(), key=lambda kv: (rank.get(kv[1]["status"], len(rank)), kv[0]))


def failing_by_host(report):
    """[(host, status, [(check id, check status, message, [gpu labels])])] for hosts with FAIL/ERROR checks,
    or the host's message when it never ran doctor (unreachable, task failed)."""
    per_host = {}
    for check_id, entries in report["failing"].items():
        for entry in entries:
            per_host.setdefault(entry["host"], []).append(
                (check_id, entry["status"], entry.get("message"), [gpu_label(g) for g in entry.get("gpus") or []]))
    rows = []
    for host, entry in host_rows(report):
        if host in per_host:
            rows.append((host, entry["status"], sorted(per_host[host], key=lambda c: (c[1] != "FAIL", c[0]))))
        elif entry["status"] in ("unreachable", "task_failed"):
            rows.append((host, entry["status"], [("host", entry["status"], entry.get("message"), [])]))
    return rows


def straggler_rows(report):
    """One row per slow host or GPU: (host, gpu label or "", class, metric, value, median, change)."""
    stragglers = analysis(report).get("stragglers") or {}
    rows = []
    for slow in stragglers.get("hosts") or []:
        for finding in slow["metrics"]:
            rows.append((slow["host"], "", slow["class"], finding["metric"], finding["value"], finding["median"],
                         percent_change(finding["ratio"])))
    for slow in stragglers.get("gpus") or []:
        for finding in slow["metrics"]:
            rows.append((slow["host"], gpu_label(slow), slow["class"], finding["metric"], finding["value"], finding["median"],
                         percent_change(finding["ratio"])))
    rows.sort(key=lambda r: (r[0], r[1], r[3]))
    return rows


def drift_rows(report):
    """(host, class, field, value, reference, basis, gpu labels) per drifting field, then per drifting Python
    package of env_setup's virtualenv (field "package <name>", None for not installed)."""
    drift = analysis(report).get("drift") or {}
    rows = [(i["host"], i["class"], i["field"], i["value"], i["reference"], i["basis"],
             ["GPU %s: %s" % (g["index"], g["value"]) for g in i.get("gpus") or []]) for i in drift.get("items") or []]
    env_drift = analysis(report).get("env_drift") or {}
    rows.extend((i["host"], i["class"], "package %s" % i["package"], i["version"], i["majority"], "majority", [])
                for i in env_drift.get("drift") or [])
    return sorted(rows, key=lambda r: (r[0], r[2]))


def drift_hosts(report):
    return set(row[0] for row in drift_rows(report))


def straggler_hosts(report):
    """Hosts with a slow host figure or a slow GPU."""
    stragglers = analysis(report).get("stragglers") or {}
    return set(s["host"] for s in (stragglers.get("hosts") or []) + (stragglers.get("gpus") or []))
