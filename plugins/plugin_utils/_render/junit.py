# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet report as JUnit XML, for CI tools (Jenkins, GitLab, AWX notifications): schemas/junit.xsd.

One <testsuite> per host, one <testcase> per host x check (classname = host, name = check id):
FAIL is a <failure>, ERROR an <error>, SKIP <skipped>, WARN passes with the warning in <system-out>.
A check blocked by a root cause (``blocked_by``) is <skipped> with a message naming its root; the root's
<error> says how many checks it blocked.
A host that never ran doctor (unreachable, task failed) has one testcase "host.reachable" that is an
<error>. Analysed hosts also get "fleet.drift" and "fleet.stragglers" testcases (a <failure> when the
host drifts from its class or is slower than it). Each workload row of a host is a testcase "workload.<name>":
a <failure> for FAILURE, TIMEOUT or an unreadable performance, <skipped> for SKIPPED, passing with a WARN note
when the host is a straggler of its class.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import functools
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, RUN_SKIPPED, SKIP, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import NOT_JUDGED, reported_checks
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import printable

# Characters XML 1.0 cannot carry at all (even escaped): replaced, so the file always parses.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTR = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
_ATTR_RE = re.compile(r'[&<>"\n\r\t]')
_TEXT = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_TEXT_RE = re.compile(r"[&<>]")

# What a <testcase> comes to (JUnit's element names; a passing case has none). A WARN passes, with a note.
FAILURE = "failure"
CASE_ERROR = "error"
SKIPPED = "skipped"
WARNED = WARN  # no JUnit element: a passing case with a note
_COUNTED = (FAILURE, CASE_ERROR, SKIPPED)


def attr(value: object) -> str:
    return _attr("" if value is None else str(value))


@functools.lru_cache(maxsize=1 << 16)  # host names and check ids repeat on every test case
def _attr(text: str) -> str:
    return _ATTR_RE.sub(lambda m: _ATTR[m.group(0)], _NOT_XML.sub("\ufffd", printable(text, keep="\t\n\r")))


def text(value: object) -> str:
    body = _NOT_XML.sub("\ufffd", printable(value, keep="\t\n\r"))
    return _TEXT_RE.sub(lambda m: _TEXT[m.group(0)], body)


def _seconds(ms: object) -> str:
    return "%.3f" % (ms / 1000.0) if isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms >= 0 else "0.000"


def _case(host: str, name: str, outcome: Optional[str] = None, message: Optional[str] = None, body: Optional[str] = None,
          duration_ms: Optional[float] = None) -> str:
    """One <testcase>: outcome is None (pass), FAILURE, CASE_ERROR, SKIPPED or WARNED."""
    head = '  <testcase classname="%s" name="%s" time="%s"' % (attr(host), attr(name), _seconds(duration_ms))
    if outcome is None:
        return head + "/>\n"
    if outcome == SKIPPED:
        return head + '>\n    <skipped message="%s"/>\n  </testcase>\n' % attr(message)
    if outcome == WARNED:
        return head + ">\n    <system-out>" + WARN + ": %s</system-out>\n  </testcase>\n" % text(message)
    return head + '>\n    <%s type="%s" message="%s">%s</%s>\n  </testcase>\n' % (
        outcome, FAIL if outcome == FAILURE else ERROR, attr(message), text(body or message), outcome)


_OUTCOME = {FAIL: FAILURE, ERROR: CASE_ERROR, SKIP: SKIPPED, WARN: WARNED, PASS: None}


Case = tuple[Optional[str], tuple[Any, ...]]


def _host_cases(host: str, entry: Mapping[str, Any], drift_items: Optional[Sequence[Sequence[Any]]],
                slow: Optional[Sequence[Sequence[Any]]]) -> Iterator[Case]:
    doctor = entry.get("doctor")
    if doctor is None and entry["status"] in NOT_JUDGED:
        yield CASE_ERROR, (host, "host.reachable", CASE_ERROR, entry.get("message") or entry["status"])
    blocked = views.blocked_counts({"hosts": {host: entry}}, host)
    for chk in reported_checks(entry):
        outcome = _OUTCOME.get(chk.get("status"), CASE_ERROR)
        message = chk.get("message")
        if chk.get("blocked_by") and outcome == SKIPPED and not str(message or "").startswith("blocked by "):
            message = "blocked by %s: %s" % (chk["blocked_by"], message)  # a skipped case that names its root
        if blocked.get(chk.get("id")) and outcome in (FAILURE, CASE_ERROR):
            message = "%s (%s)" % (message, views.blocked_phrase(blocked[chk["id"]]))
        body = message
        gpus = (chk.get("details") or {}).get("gpus") or []
        if outcome in (FAILURE, CASE_ERROR) and gpus:
            body = "%s\n%s" % (body, "\n".join(views.gpu_label(g) for g in gpus if isinstance(g, dict)))
        if outcome in (FAILURE, CASE_ERROR) and chk.get("remediation"):
            body = "%s\nremediation: %s" % (body, chk["remediation"])
        yield outcome, (host, chk.get("id"), outcome, message, body, chk.get("duration_ms"))
    if entry.get("class") is None:
        return
    if drift_items is not None:
        if drift_items:
            lines = ["%s: %s, class %s %s" % (r[2], r[3], r[5], r[4]) for r in drift_items]
            yield FAILURE, (host, "fleet.drift", FAILURE, "%d field(s) drift from the class: %s" % (
                len(lines), ", ".join(r[2] for r in drift_items)), "\n".join(lines))
        else:
            yield None, (host, "fleet.drift")
    if slow is not None:
        if slow:
            yield FAILURE, (host, "fleet.stragglers", FAILURE, "slower than the class: %s" % ", ".join(
                "%s %s %s" % (s[1] or "host", s[3], s[6]) for s in slow), "\n".join(
                "%s %s: %s vs class median %s (%s)" % (s[1] or "host", s[3], views.number(s[4]), views.number(s[5]), s[6])
                for s in slow))
        else:
            yield None, (host, "fleet.stragglers")


def _workload_cases(host: str, results: Sequence[Mapping[str, Any]]) -> Iterator[Case]:
    for item in results:
        name = "workload.%s" % item["workload"]
        seconds = item["duration_s"] * 1000.0 if isinstance(item.get("duration_s"), (int, float)) else None
        figure = "%s %s" % (views.number(item["value"]), item["metric"])
        if item["failure"]:
            yield FAILURE, (host, name, FAILURE, "%s: %s" % (item["status"], item["reason"]), None, seconds)
        elif item["status"] == RUN_SKIPPED:
            yield SKIPPED, (host, name, SKIPPED, item["reason"], None, seconds)
        elif item["straggler"]:
            yield WARNED, (host, name, WARNED, "%s: slower than class %s" % (figure, item["class"]), None, seconds)
        else:
            yield None, (host, name, None, None, None, seconds)


def render(report: Mapping[str, Any]) -> Iterator[str]:
    """JUnit XML in pieces: a first pass counts (the root element carries the totals), the second writes."""
    analysis = views.analysis(report)
    drift_by_host: dict[str, list[views.DriftRow]] = {}
    for row in views.drift_rows(report):
        drift_by_host.setdefault(row[0], []).append(row)
    slow_by_host: dict[str, list[views.StragglerRow]] = {}
    for slow_row in views.straggler_rows(report):
        slow_by_host.setdefault(slow_row[0], []).append(slow_row)
    workload_results: dict[str, list[Mapping[str, Any]]] = {}
    for item in views.workloads(report).get("results") or []:
        workload_results.setdefault(item["host"], []).append(item)

    def cases(host: str) -> Iterator[Case]:
        entry = report["hosts"][host]
        drift = drift_by_host.get(host, []) if "drift" in analysis else None
        slow = slow_by_host.get(host, []) if entry.get("profile") and "stragglers" in analysis else None
        return itertools.chain(_host_cases(host, entry, drift, slow), _workload_cases(host, workload_results.get(host, [])))

    totals = {key: 0 for key in ("tests",) + _COUNTED}
    for host in report["hosts"]:
        for outcome, _unused in cases(host):
            totals["tests"] += 1
            if outcome in totals:
                totals[outcome] += 1
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    yield '<testsuites name="continuum.hydra fleet report" tests="%d" failures="%d" errors="%d" skipped="%d" timestamp="%s">\n' % (
        totals["tests"], totals[FAILURE], totals[CASE_ERROR], totals[SKIPPED], attr(report["generated_at"]))
    for host in sorted(report["hosts"]):
        entry = report["hosts"][host]
        counts = {key: 0 for key in ("tests",) + _COUNTED}
        body = []
        for outcome, args in cases(host):
            counts["tests"] += 1
            if outcome in counts:
                counts[outcome] += 1
            body.append(_case(*args))
        properties = [("status", entry["status"]), ("class", entry.get("class"))]
        yield ('<testsuite name="%s" hostname="%s" tests="%d" failures="%d" errors="%d" skipped="%d" timestamp="%s">\n'
               "  <properties>%s</properties>\n%s</testsuite>\n" % (
                   attr(host), attr(host), counts["tests"], counts[FAILURE], counts[CASE_ERROR], counts[SKIPPED],
                   attr(report["generated_at"]),
                   "".join('<property name="%s" value="%s"/>' % (attr(k), attr(v)) for k, v in properties if v is not None),
                   "".join(body)))
    yield "</testsuites>\n"
