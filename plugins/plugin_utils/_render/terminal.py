# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The concise end-of-play summary of a fleet report, as (text, colour) lines.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, ERRORED, FAIL, FAILED, HEALTHY, PASS, UNREACHABLE, WARN, WARNING
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import MISSING, NOT_JUDGED, TASK_FAILED, UNCHECKED
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _fabric as fabric_views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import escaped_controls

# Colour names are Ansible's (C.COLOR_*); the callback applies them only where Ansible would colour
# (a TTY, no ANSIBLE_NOCOLOR).
_COLOURS = {FAIL: "red", ERROR: "red", WARN: "yellow", HEALTHY: "green", UNREACHABLE: "red", TASK_FAILED: "red", MISSING: "red",
            "DRIFT": "yellow", "SLOW": "red", "PROBLEM": "red", "REPEAT": "red", "TREND": "yellow"}
MAX_HOSTS_SHOWN = 8
MAX_ACTIONS_SHOWN = 5
MAX_GROUPS_SHOWN = 6


Line = tuple[str, Optional[str]]


def _gpu_names(gpus: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join("GPU %s %s" % (g.get("index"), g.get("pci_bus_id") or "") for g in gpus).strip()


def _host_list(names: Sequence[str], detail: Optional[Mapping[str, str]] = None) -> str:
    shown = [("%s (%s)" % (n, detail[n]) if detail and detail.get(n) else n) for n in names[:MAX_HOSTS_SHOWN]]
    more = len(names) - len(shown)
    return ", ".join(shown) + (" and %d more" % more if more > 0 else "")


# Control characters from host names or messages (a newline, an ANSI escape) must not break or recolour the
# terminal: they are shown escaped. The summary's own lines have none.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    return escaped_controls(text)


def render(report: Mapping[str, Any], paths: Iterable[str] = ()) -> list[Line]:
    """Lines of (text, colour or None)."""
    return [(_visible(text), colour) for text, colour in _lines(report, paths)]


def _lines(report: Mapping[str, Any], paths: Iterable[str]) -> list[Line]:
    totals = report["totals"]
    headline = "continuum.hydra fleet report: %d host%s: %d healthy, %d warning, %d failed, %d error, %d unreachable, %d task failed%s" % (
        totals["hosts"], "" if totals["hosts"] == 1 else "s", totals[HEALTHY], totals[WARNING], totals[FAILED], totals[ERRORED], totals[UNREACHABLE],
        totals[TASK_FAILED], "".join(", %d %s" % (totals[s], s) for s in (UNCHECKED, MISSING) if totals.get(s)))
    lines: list[Line] = [("", None), (headline, None)]
    for status in NOT_JUDGED:
        names = [h for h, e in report["hosts"].items() if e["status"] == status]
        if names:
            lines.append(("  %-11s %s" % (status.upper().replace("_", " "), _host_list(names)), _COLOURS[status]))
    for check_id, entries in report["failing"].items():
        for status in (FAIL, ERROR):
            names = [e["host"] for e in entries if e["status"] == status]
            detail = {e["host"]: _gpu_names(e["gpus"]) for e in entries if e["gpus"]}
            for name in names:  # a root cause says how many checks it blocked (they are not listed)
                blocked = views.blocked_counts(report, name).get(check_id)
                if blocked:
                    detail[name] = ", ".join(part for part in (detail.get(name), views.blocked_phrase(blocked)) if part)
            if names:
                lines.append(("  %-5s %-28s %s" % (status, check_id, _host_list(names, detail)), _COLOURS[status]))
    if report["actions"]:
        lines.append(("Top actions:", None))
        for rank, action in enumerate(report["actions"][:MAX_ACTIONS_SHOWN], 1):
            lines.append(("  %d. [%s] %s on %d host%s: %s" % (
                rank, action["status"], action["check_id"], action["host_count"], "" if action["host_count"] == 1 else "s",
                action["remediation"] or "see the check's details"), _COLOURS.get(action["status"])))
    elif totals["hosts"] and not totals[UNREACHABLE] and not totals[TASK_FAILED] and not totals.get(UNCHECKED) and not totals.get(MISSING):
        lines.append(("All hosts healthy.", _COLOURS[HEALTHY]))
    for problem in views.findings_store_problems(report):
        lines.append(("  PROBLEM %s" % problem, _COLOURS["PROBLEM"]))
    findings = views.open_finding_rows(report)
    if findings:
        lines.append(("Open findings (until acknowledged with playbooks/acknowledge.yml): %d" % len(findings), None))
        for host, gpu, check_id, status, first, _last, times, action, why in findings[:MAX_ACTIONS_SHOWN]:
            lines.append(("  %-5s %-28s %s%s, since %s, seen %d time%s%s" % (
                status, check_id, host, " (%s)" % gpu if gpu else "", first, times, "" if times == 1 else "s",
                " -> %s (%s)" % (action, why) if action else ""), _COLOURS.get(status)))
        if len(findings) > MAX_ACTIONS_SHOWN:
            lines.append(("  ... and %d more" % (len(findings) - MAX_ACTIONS_SHOWN), None))
    lines.extend(_analysis_lines(report))
    lines.extend(_workload_lines(report))
    placement = views.placement_line(report)
    if placement:
        lines.append((placement, _COLOURS[WARN] if views.placement_rows(report) else None))
    lines.extend(_interconnect_lines(report))
    fabric_line = fabric_views.line(report)
    if fabric_line:
        lines.append((fabric_line, _COLOURS[FAIL] if fabric_views.has_problems(report) else None))
    for path in paths:
        lines.append(("Report: %s" % path, None))
    evidence = report.get("evidence") or []
    if evidence:
        lines.append(("Evidence for the vendor: %d file%s under evidence/ beside the report, e.g. %s" % (
            len(evidence), "" if len(evidence) == 1 else "s", evidence[0]["path"]), None))
    return lines


def _grouped(lines: list[Line], tag: str, groups: Sequence[tuple[str, list[str], dict[str, str]]]) -> None:
    """One line per group (a field, a metric), worst-known first, at most MAX_GROUPS_SHOWN."""
    for n, (name, names, detail) in enumerate(groups):
        if n == MAX_GROUPS_SHOWN:
            lines.append(("  %-5s ... and %d more" % (tag, len(groups) - n), _COLOURS[tag]))
            break
        lines.append(("  %-5s %-28s %s" % (tag, name, _host_list(names, detail)), _COLOURS[tag]))


def _analysis_lines(report: Mapping[str, Any]) -> list[Line]:
    analysis = report.get("analysis")
    if not analysis:
        return []
    lines: list[Line] = []
    for problem in analysis.get("problems") or []:
        lines.append(("  PROBLEM %s" % problem, _COLOURS["PROBLEM"]))
    classes = analysis.get("classes") or {}
    if classes:
        lines.append(("Fleet analysis: %d class%s%s" % (len(classes), "" if len(classes) == 1 else "es", (
            ", %d host(s) unclassified" % len(analysis["unclassified"])) if analysis.get("unclassified") else ""), None))
    by_field: dict[str, list[tuple[str, str]]] = {}
    for host, _unused, field, value, reference, basis, _gpus in views.drift_rows(report):
        by_field.setdefault(field, []).append((host, "%s, class %s %s" % (value, basis, reference)))
    _grouped(lines, "DRIFT", [(field, [h for h, _unused in found], dict(found))
                              for field, found in sorted(by_field.items(), key=lambda kv: (-len(kv[1]), kv[0]))])
    stragglers = analysis.get("stragglers") or {}
    by_metric: dict[str, list[tuple[str, str]]] = {}
    for slow in stragglers.get("hosts") or []:
        for finding in slow["metrics"]:
            by_metric.setdefault(finding["metric"], []).append((slow["host"], views.percent_change(finding["ratio"])))
    for slow in stragglers.get("gpus") or []:
        for finding in slow["metrics"]:
            by_metric.setdefault(finding["metric"], []).append(
                ("%s GPU %s" % (slow["host"], slow["index"]), views.percent_change(finding["ratio"])))
    _grouped(lines, "SLOW", [(metric, [name for name, _unused in found], dict(found))
                             for metric, found in sorted(by_metric.items(), key=lambda kv: (-len(kv[1]), kv[0]))])
    by_counter: dict[str, list[tuple[str, str]]] = {}
    for outlier in (analysis.get("error_counters") or {}).get("outliers") or []:
        by_counter.setdefault(outlier["counter"], []).append(
            ("%s GPU %s" % (outlier["host"], outlier["index"]), "%s vs class median %s" % (
                views.number(outlier["value"]), views.number(outlier["median"]))))
    _grouped(lines, WARN, [("%s above class" % counter, [name for name, _unused in found], dict(found))
                           for counter, found in sorted(by_counter.items(), key=lambda kv: (-len(kv[1]), kv[0]))])
    history = analysis.get("history") or {}
    for offender in (history.get("repeat_offenders") or [])[:MAX_HOSTS_SHOWN]:
        what = "%s GPU %s %s" % (offender["host"], offender["index"], offender["uuid"]) if offender["kind"] == "gpu" else offender["host"]
        lines.append(("  REPEAT %s: failed in %d of %d runs (%s)" % (
            what, offender["runs_failed"], offender["runs"], ", ".join(offender["offences"])), _COLOURS["REPEAT"]))
    for trend in (history.get("degrading") or [])[:MAX_HOSTS_SHOWN]:
        what = "%s GPU %s" % (trend["host"], trend["index"]) if trend["uuid"] else trend["host"]
        lines.append(("  TREND %s %s %s over %d runs" % (what, trend["metric"], views.percent_change(1.0 + trend["trend"]), trend["runs"]),
                      _COLOURS["TREND"]))
    bottleneck = analysis.get("bottleneck") or {}
    if bottleneck.get("primary"):
        top = bottleneck["by_bottleneck"][0]
        lines.append(("Fleet bottleneck: %s on %d of %d profiled hosts: %s" % (
            top["bottleneck"], top["host_count"], bottleneck["hosts_with_verdict"], top["action"]), None))
    plan = analysis.get("batch_plan")
    if plan:
        if plan["error"]:
            lines.append(("  PROBLEM batch plan: %s" % plan["error"], _COLOURS["PROBLEM"]))
        else:
            lines.append(("Batch plan: %d samples over %d GPUs by %s, step time %s vs uniform batches" % (
                plan["global_batch_size"], plan["gpus_planned"], plan["metric"],
                views.percent_change(1.0 - plan["expected_step_time_gain"])), None))
    return lines


def _interconnect_lines(report: Mapping[str, Any]) -> list[Line]:
    """The interconnect sentence, then the worst breaches (the report's actions name the steps)."""
    line = views.interconnect_line(report)
    if not line:
        return []
    breaches = [r for r in views.interconnect_rate_rows(report) if r[0] != PASS]
    lines: list[Line] = [(line, _COLOURS[breaches[0][0]] if breaches else None)]
    for status, host, subject, counter, rate, limit, interval in breaches[:MAX_HOSTS_SHOWN]:
        lines.append(("  %-5s %s %s %s %s over %s (limit %s)" % (status, host, subject, counter, rate, interval, limit), _COLOURS[status]))
    if len(breaches) > MAX_HOSTS_SHOWN:
        lines.append(("  ... and %d more over the limit" % (len(breaches) - MAX_HOSTS_SHOWN), None))
    return lines


def _workload_lines(report: Mapping[str, Any]) -> list[Line]:
    """A count line, one line per workload x class x metric, then the stragglers and the failures."""
    section = views.workloads(report)
    if not section:
        return []
    counts = ", ".join("%d %s" % (n, status) for status, n in section["counts"].items() if n) or "nothing ran"
    hosts = len(section["hosts"])
    headline = "Workloads: %d on %d host%s: %s" % (len(section["workloads"]), hosts, "" if hosts == 1 else "s", counts)
    lines: list[Line] = [(headline, None)]
    for key, klass, metric, n, med, low, high, slow, any_slow in views.workload_rows(report):
        lines.append(("  %-20s %s: median %s %s (min %s, max %s, %d host%s)" % (
            key, klass, views.number(med), metric, views.number(low), views.number(high), n, "" if n == 1 else "s"), None))
        if any_slow:
            lines.append(("  SLOW  %-20s %s" % (key, slow), _COLOURS["SLOW"]))
    failures = views.workload_failure_rows(report)
    for key, host, _klass, status, reason, _line in failures[:MAX_HOSTS_SHOWN]:
        lines.append(("  %-5s %-20s %s: %s" % (FAIL, key, host, "%s, %s" % (status, reason) if reason else status), _COLOURS[FAIL]))
    if len(failures) > MAX_HOSTS_SHOWN:
        lines.append(("  %-5s ... and %d more" % (FAIL, len(failures) - MAX_HOSTS_SHOWN), _COLOURS[FAIL]))
    return lines
