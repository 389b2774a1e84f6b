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
    yield from _grouped(views.FAILING_TITLE, views.FAILING_COLUMNS, views.failing_table(report), "No failing checks.")
    if report.get("findings"):
        yield from _grouped(views.FINDINGS_TITLE, views.FINDING_COLUMNS, views.finding_table(report), "No open findings.",
                            views.FINDINGS_NOTE)
        yield from _timeline(report)
    if len(report["actions"]) > views.TOP_ACTIONS:
        yield "## %s\n\n" % views.ACTIONS_TITLE
        yield from _table(list(views.ACTION_COLUMNS), (
            [str(n), md(a["status"]), md(a["check_id"]), _hosts(a.get("hosts") or []), md(a["remediation"] or "see the check's details")]
            for n, a in enumerate(report["actions"], 1)))

    evidence = report.get("evidence") or []
    if evidence:
        yield "## Evidence for the vendor\n\n%s\n\n" % md(
            "One file per failing GPU: attach it and the nvidia-bug-report.sh output it names to the RMA ticket.", cell=False)
        yield from _table(["host", "GPU", "serial", "evidence"], (
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
    yield "## Configuration drift\n\n"
    if drift:
        yield from _table(["host", "class", "field", "value", "expected", "basis", "GPUs"], (
            [md(h), md(c), md(f), md(v), md(r), md(b), md(", ".join(g)) if g else "-"] for h, c, f, v, r, b, g in drift))
    else:
        yield "No drift.\n\n"

    stragglers = views.straggler_rows(report)
    yield "## Stragglers\n\n"
    if stragglers:
        yield from _table(["host", "GPU", "class", "metric", "value", "class median", "vs median"], (
            [md(h), md(g) if g else "-", md(c), md(m), md(views.number(v)), md(views.number(med)), md(ch)]
            for h, g, c, m, v, med, ch in stragglers))
    else:
        yield "No stragglers.\n\n"
    yield from _workloads(report)
    yield from _placement(report)
    yield from _interconnect(report)
    yield from _fabric(report)
    yield from _coverage(report)

    outliers = (analysis.get("error_counters") or {}).get("outliers") or []
    if outliers:
        yield "## Error counters above the class\n\n"
        yield from _table(["host", "GPU", "class", "counter", "count", "class median", "robust z", "status"], (
            [md(o["host"]), md(views.gpu_label(o)), md(o["class"]), md(o["counter"]), md(views.number(o["value"])),
             md(views.number(o["median"])), md(views.number(o["robust_z"])), md(o["status"])] for o in outliers))

    bottleneck = analysis.get("bottleneck") or {}
    if bottleneck.get("primary"):
        yield "## Fleet bottleneck\n\n**%s** limits %d of %s.\n\n" % (
            md(bottleneck["primary"], cell=False), bottleneck["by_bottleneck"][0]["host_count"],
            plural(bottleneck["hosts_with_verdict"], "profiled host"))
        yield from _table(["#", "action", "bottlenecks", "hosts"], (
            [str(n), md(a["action"]), md(", ".join(a["bottlenecks"])), str(a["host_count"])]
            for n, a in enumerate(bottleneck["actions"], 1)))

    history = analysis.get("history") or {}
    if history:
        yield "## History (%s)\n\n" % plural(history["runs"], "run")
        if history["repeat_offenders"]:
            yield from _table(["host", "GPU", "failed in runs", "offences", "failing now"], (
                [md(o["host"]), md(views.gpu_label(o)) if o["kind"] == "gpu" else "-",
                 "%d of %d" % (o["runs_failed"], o["runs"]), md(", ".join(o["offences"])), "yes" if o["failing_now"] else "no"]
                for o in history["repeat_offenders"]))
        if history["degrading"]:
            yield from _table(["host", "GPU", "metric", "trend", "EWMA", "runs"], (
                [md(d["host"]), md(views.gpu_label(d)) if d["uuid"] else "-", md(d["metric"]),
                 md(views.percent_change(1.0 + d["trend"])), md(views.number(d["ewma"])), str(d["runs"])]
                for d in history["degrading"]))
        if not history["repeat_offenders"] and not history["degrading"]:
            yield "No repeat offenders, no degrading trends.\n\n"

    plan = analysis.get("batch_plan")
    if plan:
        yield "## Batch plan\n\n"
        if plan["error"]:
            yield "> **Problem:** %s\n\n" % md(plan["error"], cell=False)
        else:
            yield "Global batch %d over %s by %s: expected step time %s vs uniform batches.\n\n" % (
                plan["global_batch_size"], plural(plan["gpus_planned"], "GPU"), md(plan["metric"], cell=False),
                md(views.percent_change(1.0 - plan["expected_step_time_gain"]), cell=False))
            yield from _table(["host", "batch", "per GPU"], (
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
        yield "\n_%s_\n" % md("and %s: see %s below" % (plural(more, "more action"), views.ACTIONS_TITLE), cell=False)
    if actions:
        yield "\n"
    for status, names in needs:
        yield "- **%s** (%d): %s\n" % (md(views.status_label(status), cell=False), len(names), md(views.host_preview(names), cell=False))
    for status, line in verdicts:
        yield "- **%s** %s\n" % (md(status, cell=False), md(line, cell=False))
    yield "\n"


def _grouped(title: str, columns: Sequence[str], rows: Sequence[views.GroupRow], empty: str, note: str = "") -> Iterator[str]:
    """A table of (check, status) groups: a group of few hosts one row each, a larger one a row with its count and
    first names."""
    yield "## %s\n\n" % title
    if note:
        yield "%s\n\n" % md(note, cell=False, line_start=True)
    if not rows:
        yield "%s\n\n" % empty
        return
    yield from _table(list(columns), (
        [(md(member.host) if member is not None else _hosts(group.hosts)) if column == views.HOSTS_COLUMN
         else md(cells[column]) if cells[column] else "-" for column in columns]
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
    yield "## GPU placement\n\n%s.\n\n" % md(line, cell=False, line_start=True)
    rows = views.placement_rows(report)
    if rows:
        yield from _table(["host", "class", "lowest", "GPUs below (score, nearest NIC and link)"], (
            [md(h), md(c) if c else "-", md(views.number(low)), md(", ".join("%s %s (%s)" % (g, views.number(s), n) for g, s, n in gpus))]
            for h, c, low, gpus in rows))
    unscored = views.placement(report)["unscored"]
    if unscored:
        yield from _table(["host", "not scored because"], ([md(u["host"]), md(u["reason"])] for u in unscored))


def _interconnect(report: Mapping[str, Any]) -> Iterator[str]:
    """Error rates across runs, flaps, ports off their peers, hosts off their NVLink domain (none of it without readings)."""
    line = views.interconnect_line(report)
    if not line:
        return
    yield "## Interconnect\n\n%s.\n\n" % md(line, cell=False, line_start=True)
    rates = views.interconnect_rate_rows(report)
    if rates:
        yield "### Worst ports and links by rate\n\n"
        yield from _table(["status", "host", "port / link / device", "counter", "since the last run", "limit", "interval"], (
            [md(st), md(h), md(sub), md(c), md(r), md(lim), md(i)] for st, h, sub, c, r, lim, i in rates))
    flaps = views.interconnect_flap_rows(report)
    if flaps:
        yield "### Flaps\n\n"
        yield from _table(["host", "port / GPU", "since the last run"], ([md(h), md(sub), md(ch)] for h, sub, ch in flaps))
    peers = views.interconnect_peer_rows(report)
    if peers:
        yield "### Ports off their peers\n\n"
        yield from _table(["status", "host", "port", "is", "its class has it", "peers"], (
            [md(st), md(h), md(p), md(what), md(want), md(names) or "-"] for st, h, p, what, want, names in peers))
    domains = views.interconnect_domain_rows(report)
    if domains:
        yield "### Hosts off their NVLink domain\n\n"
        yield from _table(["host", "NVLink domain", "its GPUs report", "the domain has", "hosts that agree"], (
            [md(h), md(d), md(seen), md(want), md(names) or "-"] for h, d, seen, want, names in domains))
    resets = views.interconnect_reset_rows(report)
    if resets:
        yield "### Not judged this run\n\n"
        yield from _table(["host", "port / link / device", "why"], ([md(h), md(sub), md(why)] for h, sub, why in resets))


def _fabric(report: Mapping[str, Any]) -> Iterator[str]:
    """The fabric test (playbooks/fabric.yml): what it found, then every round's groups."""
    line = fabric_views.line(report)
    if not line:
        return
    yield "## Fabric\n\n%s.\n\n" % md(line, cell=False, line_start=True)
    isolated = fabric_views.isolated_rows(report)
    if isolated:
        yield from _table(["isolated host", "rounds", "proof"], ([md(h), md(r), md(p)] for h, r, p in isolated))
    yield from _table(["round", "stage", "group", "purpose", "members", "bus bandwidth", "floor", "verdict"], (
        [md(str(n)), md(st), md(g), md(pu), md(m), md(b), md(f), md(v)] for n, st, g, pu, m, b, f, v in fabric_views.round_rows(report)))


def _coverage(report: Mapping[str, Any]) -> Iterator[str]:
    """Screening coverage (playbooks/screen.yml): the nodes never screened, then the overdue, longest first."""
    line = views.coverage_line(report)
    if not line:
        return
    yield "## %s\n\n%s.\n\n" % (views.COVERAGE_TITLE, md(line, cell=False, line_start=True))
    rows = views.coverage_rows(report)
    if rows:
        yield from _table(list(views.COVERAGE_COLUMNS), ([_hosts(r.hosts), md(r.last_screened), md(r.overdue_by)] for r in rows))


def _workloads(report: Mapping[str, Any]) -> Iterator[str]:
    """Per workload, a table per class and metric, then its failures (none of it without workload runs)."""
    section = views.workloads(report)
    if not section:
        return
    counts = section["counts"]
    yield "## Workloads\n\n%s\n\n" % md("%s on %s: %s." % (
        plural(len(section["workloads"]), "workload"), plural(len(section["hosts"]), "host"),
        ", ".join("%d %s" % (n, status) for status, n in counts.items() if n) or "nothing ran"), cell=False, line_start=True)
    failures = views.workload_failure_rows(report)
    for key in section["workloads"]:
        yield "### %s\n\n" % md(key, cell=False, line_start=True)
        table = [r for r in views.workload_rows(report) if r[0] == key]
        if table:
            yield from _table(["class", "metric", "hosts", "median", "min", "max", "stragglers"], (
                [md(c), md(m), str(n), md(views.number(med)), md(views.number(lo)), md(views.number(hi)), md(slow) or "-"]
                for _key, c, m, n, med, lo, hi, slow, _any in table))
        else:
            yield "No host measured it.\n\n"
        mine = [r for r in failures if r[0] == key]
        if mine:
            yield from _table(["host", "class", "status", "reason", "last log line"], (
                [md(h), md(c), md(st), md(reason), md(line) or "-"] for _key, h, c, st, reason, line in mine))
