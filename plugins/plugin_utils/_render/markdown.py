# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet report as Markdown (GitHub-flavoured tables), for tickets, wikis and merge requests.

Every string from the fleet (host names, GPU names, messages) goes through md(), which escapes only what
Markdown would read as markup, so dates, numbers and check ids stay as they are:

- control characters are replaced (_text.printable), line breaks become <br> so a message cannot break a
  table row;
- ``&``, ``<`` and ``>`` become entities (Markdown renderers pass raw HTML through);
- the inline markup characters ``\\ * _ [ ] ~ |`` and a stray backtick are backslash-escaped; a block
  marker (``#``, ``>``, ``-``, ``+``, ``=``, ``1.``) is escaped only where the text starts a line;
- a code span (text between matching backticks) is kept as one: CommonMark shows its content literally,
  so nothing inside is escaped but a table's ``|``.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _fabric as fabric_views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import plural, printable

_INLINE = re.compile(r"([\\`*_\[\]~|])")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML = re.compile(r"[&<>]")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
_BLOCK_START = re.compile(r"^([#>+=-]|\d{1,9}[.)])(?=\s|$)")
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")
MAX_ROWS = 25  # per table, so the report fits a ticket or a chat message; the HTML page and the JSON have every row


def _plain(text: str) -> str:
    text = _HTML.sub(lambda m: _ENTITIES[m.group(0)], text)
    return _LINE_BREAKS.sub("<br>", _INLINE.sub(r"\\\1", text))


def _code(ticks: str, body: str, cell: bool) -> str:
    body = " ".join(_LINE_BREAKS.split(body))  # CommonMark reads a line ending in a code span as a space
    if cell:
        body = body.replace("|", "\\|")  # GFM splits table cells before it reads code spans
    return ticks + body + ticks


def md(value: object, cell: bool = True, line_start: bool = False) -> str:
    """Escape any value for a Markdown table cell (``cell``) or paragraph; ``line_start`` when it begins a line."""
    text = printable("-" if value is None else value, keep="\n\r\t")
    out = []
    pos = 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_plain(text[pos:match.start()]))
        out.append(_code(match.group(1), match.group(2), cell))
        pos = match.end()
    out.append(_plain(text[pos:]))
    result = "".join(out)
    if line_start:
        result = _BLOCK_START.sub(lambda m: "\\" + m.group(1) if not m.group(1)[0].isdigit() else m.group(1)[:-1] + "\\" + m.group(1)[-1], result)
    return result


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], limit: int = MAX_ROWS) -> Iterator[str]:
    yield "| %s |\n" % " | ".join(header)
    yield "|%s\n" % ("---|" * len(header))
    count = 0
    for row in rows:
        if count == limit:
            yield "\n_%s_\n" % md("Only the first %d rows are shown; fleet-report.html and fleet-report.json have all." % limit, cell=False)
            break
        yield "| %s |\n" % " | ".join(row)
        count += 1
    yield "\n"


def render(report: Mapping[str, Any]) -> Iterator[str]:
    """Markdown text in pieces: the first screen (what is broken, what to do first), the grouped failing checks and
    findings, then the detail sections."""
    totals = report["totals"]
    analysis = views.analysis(report)
    yield "# continuum.hydra fleet report\n\n"
    yield "%s, playbook %s: **%s**\n\n" % (md(report["generated_at"], cell=False, line_start=True), md(report.get("playbook"), cell=False),
                                           md(views.headline(report), cell=False))
    statuses = [s for s in views.STATUS_ORDER if s in totals]
    yield from _table([md(views.status_label(s)) for s in statuses], [[str(totals[s]) for s in statuses]])
    for problem in list(analysis.get("problems") or []) + views.findings_store_problems(report):
        yield "> **Problem:** %s\n\n" % md(problem, cell=False)
    yield from _first(report)
    yield from _grouped(views.FAILING, views.failing_table(report))
    if report.get("findings"):
        yield from _grouped(views.FINDINGS, views.finding_table(report), views.FINDINGS_NOTE)
        yield from _timeline(report)
    if len(report["actions"]) > views.TOP_ACTIONS:
        yield "## %s\n\n" % views.ACTIONS.title
        yield from _table(views.ACTIONS.columns, (
            [str(n), md(a["status"]), md(a["check_id"]), _hosts(a.get("hosts") or []), md(a["remediation"] or "see the check's details")]
            for n, a in enumerate(report["actions"], 1)))

    evidence = report.get("evidence") or []
    if evidence:
        yield "## %s\n\n%s\n\n" % (views.EVIDENCE.title, md(views.EVIDENCE_NOTE, cell=False))
        yield from _table(views.EVIDENCE.columns, (
            [md(e["host"]), md(views.gpu_label(e)), md(e.get("serial")), "[%s](%s)" % (md(e["path"]), e["path"])]
            for e in evidence))

    classes = analysis.get("classes") or {}
    if classes:
        yield "## Hardware classes\n\n"
        shown = [s for s in views.STATUS_ORDER if s in totals]
        yield from _table(["class", "basis", "hosts"] + [md(views.status_label(s)) for s in shown], (
            [md(name), md(info["basis"]), str(len(info["hosts"]))] + [str(info["status"].get(s, 0)) for s in shown]
            for name, info in classes.items()))

    drift = views.drift_rows(report)
    yield "## %s\n\n" % views.DRIFT.title
    if drift:
        yield from _table(views.DRIFT.columns, (
            [md(h), md(c), md(f), md(v), md(r), md(b), md(", ".join(g)) if g else "-"] for h, c, f, v, r, b, g in drift))
    else:
        yield "%s\n\n" % views.DRIFT.empty

    stragglers = views.straggler_rows(report)
    yield "## %s\n\n" % views.STRAGGLERS.title
    if stragglers:
        yield from _table(views.STRAGGLERS.columns, (
            [md(h), md(g) if g else "-", md(c), md(m), md(views.number(v)), md(views.number(med)), md(ch)]
            for h, g, c, m, v, med, ch in stragglers))
    else:
        yield "%s\n\n" % views.STRAGGLERS.empty
    yield from _workloads(report)
    yield from _placement(report)
    yield from _interconnect(report)
    yield from _fabric(report)
    yield from _coverage(report)

    outliers = (analysis.get("error_counters") or {}).get("outliers") or []
    if outliers:
        yield "## %s\n\n" % views.ERROR_COUNTERS.title
        yield from _table(views.ERROR_COUNTERS.columns, (
            [md(o["host"]), md(views.gpu_label(o)), md(o["class"]), md(o["counter"]), md(views.number(o["value"])),
             md(views.number(o["median"])), md(views.number(o["robust_z"])), md(o["status"])] for o in outliers))

    bottleneck = analysis.get("bottleneck") or {}
    if bottleneck.get("primary"):
        yield "## %s\n\n**%s** limits %d of %s.\n\n" % (
            views.BOTTLENECK.title, md(bottleneck["primary"], cell=False), bottleneck["by_bottleneck"][0]["host_count"],
            plural(bottleneck["hosts_with_verdict"], "profiled host"))
        yield from _table(views.BOTTLENECK.columns, (
            [str(n), md(a["action"]), md(", ".join(a["bottlenecks"])), str(a["host_count"])]
            for n, a in enumerate(bottleneck["actions"], 1)))

    history = analysis.get("history") or {}
    if history:
        yield "## %s (%s)\n\n" % (views.HISTORY_TITLE, plural(history["runs"], "run"))
        if history["repeat_offenders"]:
            yield from _table(views.OFFENDERS.columns, (
                [md(o["host"]), md(views.gpu_label(o)) if o["kind"] == "gpu" else "-",
                 "%d of %d" % (o["runs_failed"], o["runs"]), md(", ".join(o["offences"])), "yes" if o["failing_now"] else "no"]
                for o in history["repeat_offenders"]))
        if history["degrading"]:
            yield from _table(views.DEGRADING.columns, (
                [md(d["host"]), md(views.gpu_label(d)) if d["uuid"] else "-", md(d["metric"]),
                 md(views.percent_change(1.0 + d["trend"])), md(views.number(d["ewma"])), str(d["runs"])]
                for d in history["degrading"]))
        if not history["repeat_offenders"] and not history["degrading"]:
            yield "%s\n\n" % views.HISTORY_EMPTY

    plan = analysis.get("batch_plan")
    if plan:
        yield "## %s\n\n" % views.BATCH_PLAN.title
        if plan["error"]:
            yield "> **Problem:** %s\n\n" % md(plan["error"], cell=False)
        else:
            yield "Global batch %d over %s by %s: expected step time %s vs uniform batches.\n\n" % (
                plan["global_batch_size"], plural(plan["gpus_planned"], "GPU"), md(plan["metric"], cell=False),
                md(views.percent_change(1.0 - plan["expected_step_time_gain"]), cell=False))
            yield from _table(views.BATCH_PLAN.columns, (
                [md(host), str(entry["batch_size"]), md(" ".join(str(g["batch_size"]) for g in entry["gpus"]))]
                for host, entry in sorted(plan["hosts"].items())))


def _hosts(names: Sequence[str]) -> str:
    """A host list in a cell: the names when few, else the count and the first names ("+M more")."""
    if len(names) <= views.FEW_HOSTS:
        return md(", ".join(names))
    return "**%d hosts**: %s" % (len(names), md(views.host_preview(names)))


def _first(report: Mapping[str, Any]) -> Iterator[str]:
    """What to do first: the top actions with their hosts, the hosts that need action, the fleet-wide verdicts."""
    actions, more = views.top_actions(report)
    needs = views.needs_action(report)
    verdicts = views.verdict_lines(report)
    if not (actions or needs or verdicts):
        return
    yield "## %s\n\n" % views.FIRST_TITLE
    for rank, status, check_id, count, hosts, remediation in actions:
        yield "%d. **%s** %s on %s (%s): %s\n" % (rank, md(status, cell=False), md(check_id, cell=False), plural(count, "host"),
                                                  md(hosts, cell=False), md(remediation, cell=False))
    if more:
        yield "\n_%s_\n" % md("and %s: see %s below" % (plural(more, "more action"), views.ACTIONS.title), cell=False)
    if actions:
        yield "\n"
    for status, names in needs:
        yield "- **%s** (%d): %s\n" % (md(views.status_label(status), cell=False), len(names), md(views.host_preview(names), cell=False))
    for status, line in verdicts:
        yield "- **%s** %s\n" % (md(status, cell=False), md(line, cell=False))
    yield "\n"


def _grouped(table: views.Table, rows: Sequence[views.GroupRow], note: str = "") -> Iterator[str]:
    """A table of (check, status) groups: a group of few hosts one row each, a larger one a row with its count and
    first names."""
    yield "## %s\n\n" % table.title
    if note:
        yield "%s\n\n" % md(note, cell=False, line_start=True)
    if not rows:
        yield "%s\n\n" % table.empty
        return
    yield from _table(table.columns, (
        [(md(member.host) if member is not None else _hosts(group.hosts)) if column == views.HOSTS_COLUMN
         else md(cells[column]) if cells[column] else "-" for column in table.columns]
        for group, member, cells in rows))


def _timeline(report: Mapping[str, Any]) -> Iterator[str]:
    """Findings opened and closed per run, as the store remembers them."""
    line = views.timeline_line(report)
    if line:
        yield "%s.\n\n" % md(line, cell=False, line_start=True)
        yield from _table(["run", "opened", "closed since the run before", "open after it"], (
            [md(at), str(opened), str(closed), str(still)] for at, opened, closed, still in views.findings_timeline(report)))


def _placement(report: Mapping[str, Any]) -> Iterator[str]:
    """The hosts with GPUs below the placement threshold, their GPUs and nearest NIC (none of it without scores)."""
    line = views.placement_line(report)
    if not line:
        return
    yield "## %s\n\n%s.\n\n" % (views.PLACEMENT.title, md(line, cell=False, line_start=True))
    rows = views.placement_rows(report)
    if rows:
        yield from _table(views.PLACEMENT.columns, (
            [md(h), md(c) if c else "-", md(views.number(low)), md(", ".join("%s %s (%s)" % (g, views.number(s), n) for g, s, n in gpus))]
            for h, c, low, gpus in rows))
    unscored = views.placement(report)["unscored"]
    if unscored:
        yield from _table(views.UNSCORED.columns, ([md(u["host"]), md(u["reason"])] for u in unscored))


def _interconnect(report: Mapping[str, Any]) -> Iterator[str]:
    """Error rates across runs, flaps, ports off their peers, hosts off their NVLink domain (none of it without readings)."""
    line = views.interconnect_line(report)
    if not line:
        return
    yield "## %s\n\n%s.\n\n" % (views.INTERCONNECT_TITLE, md(line, cell=False, line_start=True))
    rates = views.interconnect_rate_rows(report)
    if rates:
        yield "### %s\n\n" % views.RATES.title
        yield from _table(views.RATES.columns, (
            [md(st), md(h), md(sub), md(c), md(r), md(lim), md(i)] for st, h, sub, c, r, lim, i in rates))
    flaps = views.interconnect_flap_rows(report)
    if flaps:
        yield "### %s\n\n" % views.FLAPS.title
        yield from _table(views.FLAPS.columns, ([md(h), md(sub), md(ch)] for h, sub, ch in flaps))
    peers = views.interconnect_peer_rows(report)
    if peers:
        yield "### %s\n\n" % views.PEERS.title
        yield from _table(views.PEERS.columns, (
            [md(st), md(h), md(p), md(what), md(want), md(names) or "-"] for st, h, p, what, want, names in peers))
    domains = views.interconnect_domain_rows(report)
    if domains:
        yield "### %s\n\n" % views.DOMAINS.title
        yield from _table(views.DOMAINS.columns, (
            [md(h), md(d), md(seen), md(want), md(names) or "-"] for h, d, seen, want, names in domains))
    resets = views.interconnect_reset_rows(report)
    if resets:
        yield "### %s\n\n" % views.RESETS.title
        yield from _table(views.RESETS.columns, ([md(h), md(sub), md(why)] for h, sub, why in resets))


def _fabric(report: Mapping[str, Any]) -> Iterator[str]:
    """The fabric test (playbooks/fabric.yml): what it found, then every round's groups."""
    line = fabric_views.line(report)
    if not line:
        return
    yield "## %s\n\n%s.\n\n" % (views.FABRIC_TITLE, md(line, cell=False, line_start=True))
    isolated = fabric_views.isolated_rows(report)
    if isolated:
        yield from _table(views.FABRIC_ISOLATED.columns, ([md(h), md(r), md(p)] for h, r, p in isolated))
    yield from _table(views.FABRIC_ROUNDS.columns, (
        [md(str(n)), md(st), md(g), md(pu), md(m), md(b), md(f), md(v)] for n, st, g, pu, m, b, f, v in fabric_views.round_rows(report)))


def _coverage(report: Mapping[str, Any]) -> Iterator[str]:
    """Screening coverage (playbooks/screen.yml): the nodes never screened, then the overdue, longest first."""
    line = views.coverage_line(report)
    if not line:
        return
    yield "## %s\n\n%s.\n\n" % (views.COVERAGE.title, md(line, cell=False, line_start=True))
    rows = views.coverage_rows(report)
    if rows:
        yield from _table(views.COVERAGE.columns, ([_hosts(r.hosts), md(r.last_screened), md(r.overdue_by)] for r in rows))


def _workloads(report: Mapping[str, Any]) -> Iterator[str]:
    """Per workload, a table per class and metric, then its failures (none of it without workload runs)."""
    section = views.workloads(report)
    if not section:
        return
    counts = section["counts"]
    yield "## %s\n\n%s\n\n" % (views.WORKLOADS_TITLE, md("%s on %s: %s." % (
        plural(len(section["workloads"]), "workload"), plural(len(section["hosts"]), "host"),
        ", ".join("%d %s" % (n, status) for status, n in counts.items() if n) or "nothing ran"), cell=False, line_start=True))
    failures = views.workload_failure_rows(report)
    for key in section["workloads"]:
        yield "### %s\n\n" % md(key, cell=False, line_start=True)
        table = [r for r in views.workload_rows(report) if r[0] == key]
        if table:
            yield from _table(views.WORKLOAD.columns, (
                [md(c), md(m), str(n), md(views.number(med)), md(views.number(lo)), md(views.number(hi)), md(slow) or "-"]
                for _key, c, m, n, med, lo, hi, slow, _any in table))
        else:
            yield "%s\n\n" % views.WORKLOAD.empty
        mine = [r for r in failures if r[0] == key]
        if mine:
            yield from _table(views.WORKLOAD_FAILURES.columns, (
                [md(h), md(c), md(st), md(reason), md(line) or "-"] for _key, h, c, st, reason, line in mine))
