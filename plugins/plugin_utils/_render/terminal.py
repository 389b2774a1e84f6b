# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The concise end-of-play summary of a fleet report, as (text, colour) lines.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import (
    ERROR,
    ERRORED,
    FAIL,
    FAILED,
    HEALTHY,
    MISSING,
    NOT_JUDGED,
    PASS,
    TASK_FAILED,
    UNCHECKED,
    UNREACHABLE,
    WARN,
    WARNING,
)
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _fabric as fabric_views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import escaped_controls, plural

# Colour names are Ansible's (C.COLOR_*); the callback applies them only where Ansible would colour
# (a TTY, no ANSIBLE_NOCOLOR).
_COLOURS = {FAIL: "red", ERROR: "red", WARN: "yellow", HEALTHY: "green", UNREACHABLE: "red", TASK_FAILED: "red", MISSING: "red",
            "DRIFT": "yellow", "SLOW": "red", "PROBLEM": "red", "REPEAT": "red", "TREND": "yellow"}
MAX_ACTIONS_SHOWN = views.TOP_ACTIONS
MAX_GROUPS_SHOWN = 6
MAX_FINDING_GROUPS = 4
MAX_LINES = 40  # the whole summary, at any fleet size: the files have the rest
MAX_PROBLEMS = 3
MAX_HISTORY_SHOWN = 3  # repeat offenders, degrading trends, interconnect breaches


Line = tuple[str, Optional[str]]


def _gpu_names(gpus: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join(views.gpu_labels(gpus))


def _host_list(names: Sequence[str], detail: Optional[Mapping[str, str]] = None) -> str:
    """A few hosts with their detail (GPUs, values); many as their count and first names, so a line stays a line."""
    if len(names) > views.FEW_HOSTS:
        return "%d hosts: %s" % (len(names), views.host_preview(names))
    return ", ".join(("%s (%s)" % (n, detail[n]) if detail and detail.get(n) else n) for n in names)


# Control characters from host names or messages (a newline, an ANSI escape) must not break or recolour the
# terminal: they are shown escaped. The summary's own lines have none.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    return escaped_controls(text)


def render(report: Mapping[str, Any], paths: Iterable[str] = ()) -> list[Line]:
    """Lines of (text, colour or None)."""
    return [(_visible(text), colour) for text, colour in _lines(report, paths)]


def _lines(report: Mapping[str, Any], paths: Iterable[str]) -> list[Line]:
    """The summary within MAX_LINES: each part capped, the least urgent cut first when the whole is still too long."""
    head = _head(report)
    tail = _tail(report, paths)
    body: list[Line] = []
    for part in (_failing_lines(report), _action_lines(report), _finding_lines(report), _analysis_lines(report),
                 _workload_lines(report), _verdict_lines(report)):
        body.extend(part)
    room = MAX_LINES - len(head) - len(tail)
    if len(body) > room:
        body = body[:room - 1] + [("  ... %d more lines: see the Markdown or HTML report" % (len(body) - room + 1), None)]
    return head + body + tail


def _head(report: Mapping[str, Any]) -> list[Line]:
    totals = report["totals"]
    headline = "continuum.hydra fleet report: %d host%s: %d healthy, %d warning, %d failed, %d error, %d unreachable, %d task failed%s" % (
        totals["hosts"], "" if totals["hosts"] == 1 else "s", totals[HEALTHY], totals[WARNING], totals[FAILED], totals[ERRORED], totals[UNREACHABLE],
        totals[TASK_FAILED], "".join(", %d %s" % (totals[s], s) for s in (UNCHECKED, MISSING) if totals.get(s)))
    lines: list[Line] = [("", None), (headline, None)]
    for status, names in views.needs_action(report):
        if status in NOT_JUDGED:
            lines.append(("  %-11s %s" % (status.upper().replace("_", " "), _host_list(names)), _COLOURS[status]))
    return lines


def _failing_lines(report: Mapping[str, Any]) -> list[Line]:
    """One line per failing (check, status), FAIL first, hosts with their GPUs; a root cause says how many checks it
    blocked (those are not listed)."""
    groups = [g for g in views.failing_groups(report) if g.status in (FAIL, ERROR)]
    lines: list[Line] = []
    for n, group in enumerate(groups):
        if n == MAX_GROUPS_SHOWN:
            lines.append(("  ... and %d more failing checks" % (len(groups) - n), None))
            break
        detail = {}
        for member in group.members[:views.FEW_HOSTS]:
            blocked = views.blocked_counts(report, member.host).get(group.check_id)
            detail[member.host] = ", ".join(part for part in (", ".join(member.gpus), views.blocked_phrase(blocked) if blocked else "")
                                            if part)
        lines.append(("  %-5s %-28s %s" % (group.status, group.check_id, _host_list(group.hosts, detail)), _COLOURS[group.status]))
    return lines


def _action_lines(report: Mapping[str, Any]) -> list[Line]:
    totals = report["totals"]
    actions, more = views.top_actions(report, MAX_ACTIONS_SHOWN)
    if not actions:
        if totals["hosts"] and not any(totals.get(s) for s in (UNREACHABLE, TASK_FAILED, UNCHECKED, MISSING)):
            return [("All hosts healthy.", _COLOURS[HEALTHY])]
        return []
    lines: list[Line] = [("Top actions:", None)]
    for rank, status, check_id, count, _hosts, remediation in actions:
        lines.append(("  %d. [%s] %s on %d host%s: %s" % (rank, status, check_id, count, "" if count == 1 else "s", remediation),
                      _COLOURS.get(status)))
    if more:
        lines.append(("  ... and %s" % plural(more, "more action"), None))
    return lines


def _finding_lines(report: Mapping[str, Any]) -> list[Line]:
    """The open findings by (check, status), worst first."""
    lines: list[Line] = [("  PROBLEM %s" % problem, _COLOURS["PROBLEM"]) for problem in views.findings_store_problems(report)]
    groups = views.finding_groups(report)
    if not groups:
        return lines
    open_items = [f for f in report.get("findings") or [] if f.get("open")]
    lines.append(("Open findings (until acknowledged with playbooks/acknowledge.yml): %d on %s" % (
        len(open_items), plural(len(set(f["host"] for f in open_items)), "host")), None))
    for n, group in enumerate(groups):
        if n == MAX_FINDING_GROUPS:
            lines.append(("  ... and %d more" % (len(groups) - n), None))
            break
        if len(group.members) == 1:
            member = group.members[0]
            what = "%s%s, since %s, seen %d time%s%s" % (
                member.host, " (%s)" % ", ".join(member.gpus) if member.gpus else "", member.first_seen, member.times_seen,
                "" if member.times_seen == 1 else "s", " -> %s" % member.escalation if member.escalation else "")
        else:
            what = "%d hosts: %s, since %s" % (len(group.members), views.host_preview(group.hosts), group.first_seen())
        lines.append(("  %-5s %-28s %s" % (group.status, group.check_id, what), _COLOURS.get(group.status)))
    timeline = views.timeline_line(report)
    if timeline:
        lines.append(("  %s" % timeline, None))
    return lines


def _verdict_lines(report: Mapping[str, Any]) -> list[Line]:
    """Placement, interconnect and fabric: a sentence each (the worst interconnect breaches under theirs)."""
    lines: list[Line] = []
    placement = views.placement_line(report)
    if placement:
        lines.append((placement, _COLOURS[WARN] if views.placement_rows(report) else None))
    lines.extend(_interconnect_lines(report))
    fabric_line = fabric_views.line(report)
    if fabric_line:
        lines.append((fabric_line, _COLOURS[FAIL] if fabric_views.has_problems(report) else None))
    return lines


def _tail(report: Mapping[str, Any], paths: Iterable[str]) -> list[Line]:
    """Where the reports are (one line for the files of one directory) and the evidence files."""
    lines: list[Line] = []
    by_dir: dict[str, list[str]] = {}
    for path in paths:
        by_dir.setdefault(os.path.dirname(path), []).append(os.path.basename(path))
    for directory, names in by_dir.items():
        lines.append(("Report: %s" % os.path.join(directory, names[0]) if len(names) == 1 else
                      "Reports in %s: %s" % (directory or ".", ", ".join(names)), None))
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
    problems = analysis.get("problems") or []
    for problem in problems[:MAX_PROBLEMS]:
        lines.append(("  PROBLEM %s" % problem, _COLOURS["PROBLEM"]))
    if len(problems) > MAX_PROBLEMS:
        lines.append(("  PROBLEM ... and %d more (the report lists them)" % (len(problems) - MAX_PROBLEMS), _COLOURS["PROBLEM"]))
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
                ("%s %s" % (slow["host"], views.gpu_label(slow)), views.percent_change(finding["ratio"])))
    _grouped(lines, "SLOW", [(metric, [name for name, _unused in found], dict(found))
                             for metric, found in sorted(by_metric.items(), key=lambda kv: (-len(kv[1]), kv[0]))])
    by_counter: dict[str, list[tuple[str, str]]] = {}
    for outlier in (analysis.get("error_counters") or {}).get("outliers") or []:
        by_counter.setdefault(outlier["counter"], []).append(
            ("%s %s" % (outlier["host"], views.gpu_label(outlier)), "%s vs class median %s" % (
                views.number(outlier["value"]), views.number(outlier["median"]))))
    _grouped(lines, WARN, [("%s above class" % counter, [name for name, _unused in found], dict(found))
                           for counter, found in sorted(by_counter.items(), key=lambda kv: (-len(kv[1]), kv[0]))])
    history = analysis.get("history") or {}
    for offender in (history.get("repeat_offenders") or [])[:MAX_HISTORY_SHOWN]:
        what = "%s %s" % (offender["host"], views.gpu_label(offender)) if offender["kind"] == "gpu" else offender["host"]
        lines.append(("  REPEAT %s: failed in %d of %d runs (%s)" % (
            what, offender["runs_failed"], offender["runs"], ", ".join(offender["offences"])), _COLOURS["REPEAT"]))
    for trend in (history.get("degrading") or [])[:MAX_HISTORY_SHOWN]:
        what = "%s %s" % (trend["host"], views.gpu_label(trend)) if trend["uuid"] else trend["host"]
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
    for status, host, subject, counter, rate, limit, interval in breaches[:MAX_HISTORY_SHOWN]:
        lines.append(("  %-5s %s %s %s %s over %s (limit %s)" % (status, host, subject, counter, rate, interval, limit), _COLOURS[status]))
    if len(breaches) > MAX_HISTORY_SHOWN:
        lines.append(("  ... and %d more over the limit" % (len(breaches) - MAX_HISTORY_SHOWN), None))
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
    rows = views.workload_rows(report)
    for key, klass, metric, n, med, low, high, slow, any_slow in rows[:MAX_GROUPS_SHOWN]:
        lines.append(("  %-20s %s: median %s %s (min %s, max %s, %d host%s)" % (
            key, klass, views.number(med), metric, views.number(low), views.number(high), n, "" if n == 1 else "s"), None))
        if any_slow:
            lines.append(("  SLOW  %-20s %s" % (key, slow), _COLOURS["SLOW"]))
    if len(rows) > MAX_GROUPS_SHOWN:
        lines.append(("  ... and %d more workload rows" % (len(rows) - MAX_GROUPS_SHOWN), None))
    failures = views.workload_failure_rows(report)
    for key, host, _klass, status, reason, _line in failures[:MAX_HISTORY_SHOWN]:
        lines.append(("  %-5s %-20s %s: %s" % (FAIL, key, host, "%s, %s" % (status, reason) if reason else status), _COLOURS[FAIL]))
    if len(failures) > MAX_HISTORY_SHOWN:
        lines.append(("  %-5s ... and %d more" % (FAIL, len(failures) - MAX_HISTORY_SHOWN), _COLOURS[FAIL]))
    return lines
