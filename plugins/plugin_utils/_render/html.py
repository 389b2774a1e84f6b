# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet report as one self-contained HTML page: inline CSS and SVG, no script, no external asset.

A Content-Security-Policy of default-src 'none' makes the browser refuse any fetch, so the page works
offline and a hostile string that slipped through could not load anything. Every string from the fleet
is escaped with html.escape (quotes included, for attributes).

Sections: totals, status by class (SVG), benchmark distributions per class with stragglers marked
(SVG), failing checks by host, actions, drift, stragglers, workloads, bottleneck, history, batch plan, every host.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Iterator, Mapping, Sequence
from html import escape
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import gpu_figures, gpu_records, host_figures
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _fabric as fabric_views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _svg
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import printable

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 24px 48px;color:#1d2327}
h1{font-size:22px;margin:20px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f6f8}td.n{text-align:right;font-variant-numeric:tabular-nums}
.tiles{display:flex;gap:10px;flex-wrap:wrap}.tile{padding:8px 14px;border-radius:6px;color:#fff;min-width:90px}
.tile b{display:block;font-size:22px}.problem{background:#fff3e0;border-left:4px solid #ef6c00;padding:6px 10px}
.s-healthy{background:#2e7d32}.s-warning{background:#f9a825}.s-error{background:#ef6c00}.s-failed{background:#c62828}
.s-unreachable{background:#6a1b9a}.s-task_failed{background:#4e342e}.s-unchecked{background:#90a4ae}.s-hosts{background:#37474f}
tr.straggler td:first-child{border-left:4px solid #c62828}tr.class th{background:#e3e8ec;text-align:left}
#host-table td:nth-child(2){font-weight:600}#host-table tr[data-status=failed] td:nth-child(2){color:#c62828}
#host-table tr[data-status=error] td:nth-child(2){color:#ef6c00}#host-table tr[data-status=unreachable] td:nth-child(2){color:#6a1b9a}
#host-table tr[data-status=warning] td:nth-child(2){color:#a07000}#host-table tr[data-status=healthy] td:nth-child(2){color:#2e7d32}
tr.drift td:first-child{box-shadow:inset 4px 0 #f9a825}
.tag{display:inline-block;padding:0 6px;border-radius:4px;color:#fff;font-size:12px}
svg.chart{display:block;margin:4px 0 14px}svg .lbl{font-size:12px;text-anchor:end}svg .num,svg .leg,svg .tick{font-size:11px}
svg .tick{text-anchor:middle}svg .box{fill:#90caf9;stroke:#1565c0}svg .whisker,svg .axis{stroke:#555}
svg .median{stroke:#1565c0;stroke-dasharray:3 3}svg .floor{stroke:#c62828;stroke-dasharray:2 4}
svg .shortfall{stroke:#ef6c00;stroke-dasharray:2 4}svg .dot{fill:#546e7a;fill-opacity:.6}
svg .straggler{fill:#c62828;stroke:#fff}
.headline{font-size:17px;font-weight:600;margin:6px 0 10px}#first ol,#first ul{margin:4px 0 8px;padding-left:24px}
#first li{margin:3px 0}#failing td:nth-child(-n+3),#findings td:nth-child(-n+3){white-space:nowrap}code{font-size:13px}
details summary{cursor:pointer}p.hosts{margin:4px 0;max-height:24em;overflow:auto;white-space:normal}
.c-FAIL,.c-failed{background:#c62828}.c-ERROR,.c-error{background:#ef6c00}.c-WARN,.c-warning{background:#f9a825}
.c-PASS,.c-healthy{background:#2e7d32}.c-unreachable{background:#6a1b9a}.c-task_failed{background:#4e342e}.c-missing{background:#546e7a}
body>section{content-visibility:auto;contain-intrinsic-size:auto 600px}
svg .opened{fill:#c62828}svg .closed{fill:#2e7d32}svg .open{fill:none;stroke:#37474f;stroke-width:2}
svg .lbl-left,svg .member{font-size:11px}svg .member.isolated{fill:#c62828;font-weight:bold}
"""


def esc(value: object) -> str:
    # A raw CR would be folded into LF by the HTML parser; as a character reference it survives.
    return escape(printable("-" if value is None else value, keep="\t\n\r"), quote=True).replace("\r", "&#13;")


def _table(header: Sequence[str], rows: Iterable[tuple[str, Sequence[str]]], table_id: Optional[str] = None) -> Iterator[str]:
    yield '<table%s><thead><tr>%s</tr></thead><tbody>\n' % (
        ' id="%s"' % table_id if table_id else "", "".join("<th>%s</th>" % esc(h) for h in header))
    for attrs, cells in rows:
        yield "<tr%s>%s</tr>\n" % (attrs, "".join(cells))
    yield "</tbody></table>\n"


def _td(value: object, numeric: bool = False) -> str:
    return '<td class="n">%s</td>' % esc(value) if numeric else "<td>%s</td>" % esc(value)


def _tag(status: str) -> str:
    return '<span class="tag s-%s">%s</span>' % (esc(status), esc(views.status_label(status)))


Sample = tuple[str, str, str]  # (scope, metric, class)


Dots = dict[Sample, list[tuple[str, float]]]  # (label, value)
Slow = dict[Sample, list[tuple[str, str, float]]]  # (host, label, value)


def _benchmark_samples(report: Mapping[str, Any], stragglers: Mapping[str, Any]) -> tuple[Dots, Slow]:
    """Per (scope, metric, class): the values as dots for small classes, and the stragglers' values."""
    dots: Dots = {}
    slow: Slow = {}
    for slow_host in stragglers.get("hosts") or []:
        for finding in slow_host["metrics"]:
            slow.setdefault(("host", finding["metric"], slow_host["class"]), []).append(
                (slow_host["host"], slow_host["host"], finding["value"]))
    for slow_gpu in stragglers.get("gpus") or []:
        for finding in slow_gpu["metrics"]:
            slow.setdefault(("gpu", finding["metric"], slow_gpu["class"]), []).append(
                (slow_gpu["host"], "%s %s" % (slow_gpu["host"], views.gpu_label(slow_gpu)), finding["value"]))
    small: Dots = {}
    for scope, key in (("host", "host_metrics"), ("gpu", "gpu_metrics")):
        for metric, entry in (stragglers.get(key) or {}).items():
            for class_name, dist in entry["classes"].items():
                if dist["n"] <= _svg.MAX_DOTS:
                    small[(scope, metric, class_name)] = []
    if small:
        for host, entry in report["hosts"].items():
            for metric, value in host_figures(entry.get("profile")).items():
                bucket = small.get(("host", metric, entry.get("class")))
                if bucket is not None:
                    bucket.append((host, value))
            for gpu in gpu_records(entry.get("profile")):
                for metric, value in gpu_figures(gpu).items():
                    bucket = small.get(("gpu", metric, entry.get("class")))
                    if bucket is not None:
                        bucket.append(("%s %s" % (host, views.gpu_label(gpu)), value))
    for sample, values in small.items():
        dots[sample] = values
    return dots, slow


def _charts(report: Mapping[str, Any], analysis: Mapping[str, Any]) -> Iterator[str]:
    classes = analysis.get("classes") or {}
    statuses = [s for s in views.STATUS_ORDER if s in report["totals"]]
    if classes:
        yield '<section id="classes"><h2>Status by class</h2>\n'
        yield _svg.status_by_class(classes, statuses)
        yield "</section>\n"


def _benchmarks(report: Mapping[str, Any], analysis: Mapping[str, Any]) -> Iterator[str]:
    """Each benchmark's distribution per class, the stragglers marked on it."""
    stragglers = analysis.get("stragglers") or {}
    metrics = [("host", m, e) for m, e in sorted((stragglers.get("host_metrics") or {}).items())] + \
              [("gpu", m, e) for m, e in sorted((stragglers.get("gpu_metrics") or {}).items())]
    if not metrics:
        return
    dots, slow = _benchmark_samples(report, stragglers)
    yield '<section id="benchmarks"><h2>Benchmarks by class</h2>\n'
    yield ("<p>Each row is a class: the box spans the middle half of its values, the whiskers 5 %% to 95 %%, the dashed "
           "line is the class median; red dots are stragglers (slower than %.2f&#215; the median, or a robust z of %s or less "
           "and at least %.0f %% slower).</p>\n" % (stragglers["rule"]["ratio_floor"], esc(stragglers["rule"]["robust_z"]),
                                                    stragglers["rule"]["min_shortfall"] * 100))
    for scope, metric, entry in metrics:
        yield "<h3>%s (%s)</h3>\n" % (esc(metric), "per GPU" if scope == "gpu" else "per host")
        yield _svg.distribution(metric, entry, dict((c, dots.get((scope, metric, c), [])) for c in entry["classes"]),
                                dict((c, slow.get((scope, metric, c), [])) for c in entry["classes"]), stragglers["rule"])
    yield "</section>\n"


def render(report: Mapping[str, Any]) -> Iterator[str]:
    """The HTML page in pieces: the first screen (what is broken, what to do first), the grouped failing checks and
    findings, the pictures, then the detail sections and every host."""
    totals = report["totals"]
    analysis = views.analysis(report)
    yield ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
           '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">'
           '<meta name="viewport" content="width=device-width, initial-scale=1">'
           "<title>continuum.hydra fleet report %s</title><style>%s</style></head><body>\n" % (esc(report["generated_at"]), CSS))
    yield '<header id="summary"><h1>continuum.hydra fleet report</h1><p>%s &#183; playbook %s</p>\n' % (
        esc(report["generated_at"]), esc(report.get("playbook")))
    yield '<p class="headline">%s</p>\n' % esc(views.headline(report))
    yield '<section id="totals" class="tiles"><div class="tile s-hosts"><b>%d</b>hosts</div>' % totals["hosts"]
    for status in views.STATUS_ORDER:
        if status in totals:
            yield '<div class="tile s-%s" data-status="%s"><b>%d</b>%s</div>' % (status, status, totals[status], esc(views.status_label(status)))
    yield "</section>\n"
    for problem in analysis.get("problems") or []:
        yield '<p class="problem">%s</p>\n' % esc(problem)
    for problem in views.findings_store_problems(report):
        yield '<p class="problem findings-store">%s</p>\n' % esc(problem)
    yield from _first(report)
    yield "</header>\n"

    yield '<section id="failing"><h2>%s</h2>\n' % esc(views.FAILING.title)
    yield from _grouped(views.FAILING, views.failing_table(report), "failing-table")
    yield "</section>\n"
    if report.get("findings"):
        yield '<section id="findings"><h2>%s</h2>\n<p>%s</p>\n' % (esc(views.FINDINGS.title), esc(views.FINDINGS_NOTE))
        yield from _grouped(views.FINDINGS, views.finding_table(report), "findings-table")
        line = views.timeline_line(report)
        if line:
            yield '<p>%s.</p>\n' % esc(line)
            yield _svg.findings_timeline(views.findings_timeline(report))
        yield "</section>\n"
    if len(report["actions"]) > views.TOP_ACTIONS:
        yield '<section id="actions"><h2>%s</h2>\n' % esc(views.ACTIONS.title)
        yield from _table(views.ACTIONS.columns, (
            ("", [_td(n, True), _td(a["status"]), _td(a["check_id"]), "<td>%s</td>" % _host_list(a.get("hosts") or []),
                  _td(a["remediation"] or "see the check's details")]) for n, a in enumerate(report["actions"], 1)), "action-table")
        yield "</section>\n"
    yield from _charts(report, analysis)

    evidence = report.get("evidence") or []
    if evidence:
        yield '<section id="evidence"><h2>%s</h2>\n<p>%s</p>\n' % (esc(views.EVIDENCE.title), esc(views.EVIDENCE_NOTE))
        yield from _table(views.EVIDENCE.columns, (
            (' data-host="%s"' % esc(e["host"]), [_td(e["host"]), _td(views.gpu_label(e)), _td(e.get("serial")),
                                                  '<td><a href="%s">%s</a></td>' % (esc(e["path"]), esc(e["path"]))])
            for e in evidence), "evidence-table")
        yield "</section>\n"

    yield '<section id="drift"><h2>%s</h2>\n' % esc(views.DRIFT.title)
    drift = views.drift_rows(report)
    if drift:
        yield from _table(views.DRIFT.columns, (
            (' data-host="%s"' % esc(h), [_td(h), _td(c), _td(f), _td(v), _td(r), _td(b), _td(", ".join(g) if g else None)])
            for h, c, f, v, r, b, g in drift), "drift-table")
    else:
        yield "<p>%s</p>\n" % esc(views.DRIFT.empty)
    for split in (analysis.get("drift") or {}).get("splits") or []:
        yield '<p class="problem">No majority for %s in %s: %s</p>\n' % (
            esc(split["field"]), esc(split["group"]), esc(", ".join("%s on %d hosts" % kv for kv in sorted(split["values"].items()))))
    yield "</section>\n"

    yield '<section id="stragglers"><h2>%s</h2>\n' % esc(views.STRAGGLERS.title)
    stragglers = views.straggler_rows(report)
    if stragglers:
        yield from _table(views.STRAGGLERS.columns, (
            (' class="straggler" data-host="%s"' % esc(h), [_td(h), _td(g or None), _td(c), _td(m), _td(views.number(v), True),
                                                            _td(views.number(med), True), _td(ch, True)])
            for h, g, c, m, v, med, ch in stragglers), "straggler-table")
    else:
        yield "<p>%s</p>\n" % esc(views.STRAGGLERS.empty)
    yield "</section>\n"
    yield from _benchmarks(report, analysis)
    yield from _workloads(report)
    yield from _placement(report)
    yield from _interconnect(report)
    yield from _fabric(report)
    yield from _coverage(report)

    outliers = (analysis.get("error_counters") or {}).get("outliers") or []
    if outliers:
        yield '<section id="error-counters"><h2>%s</h2>\n' % esc(views.ERROR_COUNTERS.title)
        yield from _table(views.ERROR_COUNTERS.columns, (
            (' data-host="%s"' % esc(o["host"]), [_td(o["host"]), _td(views.gpu_label(o)), _td(o["class"]), _td(o["counter"]),
                                                  _td(views.number(o["value"]), True), _td(views.number(o["median"]), True),
                                                  _td(views.number(o["robust_z"]), True), "<td>%s</td>" % esc(o["status"])])
            for o in outliers), "error-counter-table")
        yield "</section>\n"

    yield from _bottleneck_history_plan(analysis)

    slow_hosts = views.straggler_hosts(report)
    drifting = views.drift_hosts(report)
    # Sections below the first screen are laid out when scrolled to (content-visibility in CSS): 10,000 host rows would
    # cost the browser seconds before it paints the first screen. Their height is estimated so the scroll bar is right.
    rows = len(report["hosts"]) + len(views.analysis(report).get("classes") or {}) + 1
    yield '<section id="hosts" style="contain-intrinsic-size:auto %dpx"><h2>All hosts</h2>\n<p>By hardware class, worst first.</p>\n' % (
        80 + 26 * rows)
    yield '<table id="host-table"><thead><tr>%s</tr></thead>\n' % "".join("<th>%s</th>" % esc(h) for h in views.HOST_COLUMNS)
    for class_name, hosts in views.hosts_by_class(report):
        # The class once, above its hosts: at 10,000 hosts a class name on every row would be a megabyte.
        yield '<tbody><tr class="class"><th colspan="%d">%s (%d)</th></tr>\n' % (
            len(views.HOST_COLUMNS), esc(class_name or "unclassified"), len(hosts))
        for host, entry in hosts:
            css = " ".join(c for c, on in (("straggler", host in slow_hosts), ("drift", host in drifting)) if on)
            yield '<tr data-host="%s" data-status="%s"%s><td>%s</td><td>%s</td>%s%s%s</tr>\n' % (
                esc(host), esc(entry["status"]), ' class="%s"' % css if css else "", esc(host), esc(views.status_label(entry["status"])),
                _td(", ".join(_with_blocked(report, host, entry["failing_checks"])) or None),
                _td(", ".join(entry["warning_checks"]) or None), _td(entry.get("message")))
        yield "</tbody>\n"
    yield "</table>\n"
    yield "</section>\n</body></html>\n"


def _host_list(names: Sequence[str], lines: Optional[Iterable[str]] = None) -> str:
    """Hosts in a cell: the names when few; else the count and the first names, the whole list (``lines``: one per
    host) one click away in a <details>."""
    if len(names) <= views.FEW_HOSTS:
        return esc(", ".join(names))
    return '<details><summary><b>%d hosts</b>: %s</summary><p class="hosts">%s</p></details>' % (
        len(names), esc(views.host_preview(names, views.FEW_HOSTS)), "<br>".join(esc(line) for line in (lines or names)))


def _first(report: Mapping[str, Any]) -> Iterator[str]:
    """What to do first: the top actions with their hosts, the hosts that need action, the fleet-wide verdicts."""
    actions, more = views.top_actions(report)
    needs = views.needs_action(report)
    verdicts = views.verdict_lines(report)
    if not (actions or needs or verdicts):
        return
    yield '<section id="first"><h2>%s</h2>\n' % esc(views.FIRST_TITLE)
    if actions:
        yield '<ol class="actions">'
        for _rank, status, check_id, count, hosts, remediation in actions:
            yield '<li data-check="%s">%s <code>%s</code> on <b>%d host%s</b> (%s): %s</li>' % (
                esc(check_id), _check_tag(status), esc(check_id), count, "" if count == 1 else "s", esc(hosts), esc(remediation))
        yield "</ol>\n"
        if more:
            yield "<p>and %d more action%s: %s, below.</p>\n" % (more, "" if more == 1 else "s", esc(views.ACTIONS.title))
    if needs or verdicts:
        yield '<ul class="needs">'
        for status, names in needs:
            yield '<li data-status="%s">%s <b>%d</b>: %s</li>' % (esc(status), _tag(status), len(names), esc(views.host_preview(names)))
        for status, line in verdicts:
            yield '<li class="verdict">%s %s</li>' % (_check_tag(status), esc(line))
        yield "</ul>\n"
    yield "</section>\n"


def _grouped(table: views.Table, rows: Sequence[views.GroupRow], table_id: str) -> Iterator[str]:
    """A table of (check, status) groups: a group of few hosts one row each, a larger one a row with its hosts in a
    <details> (the per-host detail one click away)."""
    if not rows:
        yield "<p>%s</p>\n" % esc(table.empty)
        return
    out = []
    for group, member, cells in rows:
        attrs = ' data-check="%s" data-status="%s"' % (esc(group.check_id), esc(group.status))
        attrs += ' data-host="%s"' % esc(member.host) if member is not None else ' data-hosts="%d" class="group"' % len(group.members)
        out.append((attrs, [
            ("<td>%s</td>" % (esc(member.host) if member is not None else _host_list(group.hosts, views.member_lines(group))))
            if column == views.HOSTS_COLUMN else "<td>%s</td>" % _check_tag(cells[column]) if column == "status"
            else _td(cells[column] or None) for column in table.columns]))
    yield from _table(table.columns, out, table_id)


def _check_tag(status: str) -> str:
    """A check status (or a host status of an unjudged host) as a coloured tag."""
    return '<span class="tag c-%s">%s</span>' % (esc(status), esc(views.status_label(status)))


def _bottleneck_history_plan(analysis: Mapping[str, Any]) -> Iterator[str]:
    bottleneck = analysis.get("bottleneck") or {}
    if bottleneck.get("primary"):
        yield '<section id="bottleneck"><h2>%s</h2><p><b>%s</b> limits %d of %d profiled hosts.</p>\n' % (
            esc(views.BOTTLENECK.title), esc(bottleneck["primary"]), bottleneck["by_bottleneck"][0]["host_count"], bottleneck["hosts_with_verdict"])
        yield from _table(views.BOTTLENECK.columns, (
            ("", [_td(n, True), _td(a["action"]), _td(", ".join(a["bottlenecks"])), _td(a["host_count"], True)])
            for n, a in enumerate(bottleneck["actions"], 1)))
        yield "</section>\n"
    history = analysis.get("history") or {}
    if history:
        yield '<section id="history"><h2>%s (%d runs)</h2>\n' % (esc(views.HISTORY_TITLE), history["runs"])
        if history["repeat_offenders"]:
            yield "<h3>%s</h3>\n" % esc(views.OFFENDERS.title)
            yield from _table(views.OFFENDERS.columns, (
                (' class="offender" data-host="%s"' % esc(o["host"]),
                 [_td(o["host"]), _td(views.gpu_label(o) if o["kind"] == "gpu" else None),
                  _td("%d of %d" % (o["runs_failed"], o["runs"])), _td(", ".join(o["offences"])),
                  _td("yes" if o["failing_now"] else "no")]) for o in history["repeat_offenders"]), "offender-table")
        if history["degrading"]:
            yield "<h3>%s</h3>\n" % esc(views.DEGRADING.title)
            yield from _table(views.DEGRADING.columns, (
                (' data-host="%s"' % esc(d["host"]),
                 [_td(d["host"]), _td(views.gpu_label(d) if d["uuid"] else None), _td(d["metric"]),
                  _td(views.percent_change(1.0 + d["trend"]), True), _td(views.number(d["ewma"]), True), _td(d["runs"], True)])
                for d in history["degrading"]), "degrading-table")
        if not history["repeat_offenders"] and not history["degrading"]:
            yield "<p>%s</p>\n" % esc(views.HISTORY_EMPTY)
        yield "</section>\n"
    plan = analysis.get("batch_plan")
    if plan:
        yield '<section id="batch-plan"><h2>%s</h2>\n' % esc(views.BATCH_PLAN.title)
        if plan["error"]:
            yield '<p class="problem">%s</p>\n' % esc(plan["error"])
        else:
            yield "<p>Global batch %d over %d GPUs by %s: expected step time %s vs uniform batches.</p>\n" % (
                plan["global_batch_size"], plan["gpus_planned"], esc(plan["metric"]),
                esc(views.percent_change(1.0 - plan["expected_step_time_gain"])))
            yield from _table(views.BATCH_PLAN.columns, (
                (' data-host="%s"' % esc(host), [_td(host), _td(entry["batch_size"], True),
                                                 _td(" ".join(str(g["batch_size"]) for g in entry["gpus"]))])
                for host, entry in sorted(plan["hosts"].items())))
        yield "</section>\n"


def _with_blocked(report: Mapping[str, Any], host: str, check_ids: Iterable[str]) -> list[str]:
    """Check ids, a root cause with how many checks it blocked: "driver.nvidia_smi (blocked 19 checks)"."""
    blocked = views.blocked_counts(report, host)
    return ["%s (%s)" % (cid, views.blocked_phrase(blocked[cid])) if blocked.get(cid) else cid for cid in check_ids]


def _fabric(report: Mapping[str, Any]) -> Iterator[str]:
    """The fabric test (playbooks/fabric.yml): its rounds as a picture, the isolated hosts and every group."""
    line = fabric_views.line(report)
    if not line:
        return
    yield '<section id="fabric"><h2>%s</h2>\n<p>%s.</p>\n' % (esc(views.FABRIC_TITLE), esc(line))
    yield fabric_views.picture(report)
    isolated = fabric_views.isolated_rows(report)
    if isolated:
        yield from _table(views.FABRIC_ISOLATED.columns, (
            (' data-host="%s"' % esc(h), [_td(h), _td(r), _td(p)]) for h, r, p in isolated), "fabric-isolated-table")
    yield from _table(views.FABRIC_ROUNDS.columns, (
        (' data-group="%s"' % esc(g), [_td(n, True), _td(st), _td(g), _td(pu), _td(m), _td(b, True), _td(f, True), _td(v)])
        for n, st, g, pu, m, b, f, v in fabric_views.round_rows(report)), "fabric-rounds-table")
    yield "</section>\n"


def _coverage(report: Mapping[str, Any]) -> Iterator[str]:
    """Screening coverage (playbooks/screen.yml): the nodes never screened, then the overdue, longest first; a group
    of many nodes has its names in a <details>."""
    line = views.coverage_line(report)
    if not line:
        return
    yield '<section id="screening"><h2>%s</h2>\n<p>%s.</p>\n' % (esc(views.COVERAGE.title), esc(line))
    rows = views.coverage_rows(report)
    if rows:
        yield from _table(views.COVERAGE.columns, (
            (' data-host="%s"' % esc(r.hosts[0]) if len(r.hosts) == 1 else ' data-hosts="%d" class="group"' % len(r.hosts),
             ["<td>%s</td>" % _host_list(r.hosts), _td(r.last_screened), _td(r.overdue_by)]) for r in rows), "coverage-table")
    yield "</section>\n"


def _placement(report: Mapping[str, Any]) -> Iterator[str]:
    """The hosts with GPUs below the placement threshold, their GPUs and nearest NIC."""
    line = views.placement_line(report)
    if not line:
        return
    yield '<section id="placement"><h2>%s</h2>\n<p>%s.</p>\n' % (esc(views.PLACEMENT.title), esc(line))
    rows = views.placement_rows(report)
    if rows:
        yield from _table(views.PLACEMENT.columns, (
            (' data-host="%s"' % esc(h), [_td(h), _td(c), _td(views.number(low), True),
                                          _td(", ".join("%s %s (%s)" % (g, views.number(s), n) for g, s, n in gpus))])
            for h, c, low, gpus in rows), "placement-table")
    unscored = views.placement(report)["unscored"]
    if unscored:
        yield from _table(views.UNSCORED.columns, (
            (' data-host="%s"' % esc(u["host"]), [_td(u["host"]), _td(u["reason"])]) for u in unscored))
    yield "</section>\n"


def _interconnect(report: Mapping[str, Any]) -> Iterator[str]:
    """Error rates across runs, flaps, ports off their peers, hosts off their NVLink domain."""
    line = views.interconnect_line(report)
    if not line:
        return
    yield '<section id="interconnect"><h2>%s</h2>\n<p>%s.</p>\n' % (esc(views.INTERCONNECT_TITLE), esc(line))
    rates = views.interconnect_rate_rows(report)
    if rates:
        yield "<h3>%s</h3>\n" % esc(views.RATES.title)
        yield from _table(views.RATES.columns, (
            (' data-host="%s" data-status="%s"' % (esc(h), esc(st)),
             ["<td>%s</td>" % esc(st), _td(h), _td(sub), _td(c), _td(r, True), _td(lim, True), _td(i, True)])
            for st, h, sub, c, r, lim, i in rates), "interconnect-rate-table")
    flaps = views.interconnect_flap_rows(report)
    if flaps:
        yield "<h3>%s</h3>\n" % esc(views.FLAPS.title)
        yield from _table(views.FLAPS.columns, (
            (' data-host="%s"' % esc(h), [_td(h), _td(sub), _td(ch)]) for h, sub, ch in flaps), "interconnect-flap-table")
    peers = views.interconnect_peer_rows(report)
    if peers:
        yield "<h3>%s</h3>\n" % esc(views.PEERS.title)
        yield from _table(views.PEERS.columns, (
            (' data-host="%s" data-status="%s"' % (esc(h), esc(st)),
             ["<td>%s</td>" % esc(st), _td(h), _td(p), _td(what), _td(want), _td(names or None)])
            for st, h, p, what, want, names in peers), "interconnect-peer-table")
    domains = views.interconnect_domain_rows(report)
    if domains:
        yield "<h3>%s</h3>\n" % esc(views.DOMAINS.title)
        yield from _table(views.DOMAINS.columns, (
            (' data-host="%s"' % esc(h), [_td(h), _td(d), _td(seen), _td(want), _td(names or None)])
            for h, d, seen, want, names in domains), "interconnect-domain-table")
    resets = views.interconnect_reset_rows(report)
    if resets:
        yield "<h3>%s</h3>\n" % esc(views.RESETS.title)
        yield from _table(views.RESETS.columns, (
            (' data-host="%s"' % esc(h), [_td(h), _td(sub), _td(why)]) for h, sub, why in resets), "interconnect-reset-table")
    yield "</section>\n"


def _workloads(report: Mapping[str, Any]) -> Iterator[str]:
    """Per workload, a table per class and metric with the stragglers, then its failures."""
    section = views.workloads(report)
    if not section:
        return
    yield '<section id="workloads"><h2>%s</h2>\n' % esc(views.WORKLOADS_TITLE)
    failures = views.workload_failure_rows(report)
    for key in section["workloads"]:
        yield "<h3>%s</h3>\n" % esc(key)
        table = [r for r in views.workload_rows(report) if r[0] == key]
        if table:
            yield from _table(views.WORKLOAD.columns, (
                (' class="straggler"' if any_slow else "",
                 [_td(c), _td(m), _td(n, True), _td(views.number(med), True), _td(views.number(lo), True),
                  _td(views.number(hi), True), _td(slow or None)])
                for _key, c, m, n, med, lo, hi, slow, any_slow in table))
        else:
            yield "<p>%s</p>\n" % esc(views.WORKLOAD.empty)
        mine = [r for r in failures if r[0] == key]
        if mine:
            yield from _table(views.WORKLOAD_FAILURES.columns, (
                (' data-host="%s"' % esc(h), [_td(h), _td(c), _td(st), _td(reason), _td(line or None)])
                for _key, h, c, st, reason, line in mine))
    yield "</section>\n"
