# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet report as Markdown (GitHub-flavoured tables), for tickets, wikis and merge requests.

Every string from the fleet (host names, GPU names, messages) goes through md(): HTML special
characters become entities (Markdown renderers pass raw HTML through), Markdown punctuation is
backslash-escaped, and line breaks become <br> so a message cannot break a table row.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")
MAX_ROWS = 500  # per table; the HTML page and the JSON have everything


def md(value: object) -> str:
    """Escape any value for a Markdown table cell or paragraph."""
    text = "-" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    text = _PUNCTUATION.sub(r"\\\1", text)
    return _LINE_BREAKS.sub("<br>", text)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], limit: int = MAX_ROWS) -> Iterator[str]:
    yield "| %s |\n" % " | ".join(header)
    yield "|%s\n" % ("---|" * len(header))
    count = 0
    for row in rows:
        if count == limit:
            yield "\n_%s_\n" % md("Only the first %d rows are shown; fleet-report.html and fleet-report.json have all." % limit)
            break
        yield "| %s |\n" % " | ".join(row)
        count += 1
    yield "\n"


def render(report: Mapping[str, Any]) -> Iterator[str]:
    """Markdown text in pieces."""
    totals = report["totals"]
    analysis = views.analysis(report)
    yield "# continuum.hydra fleet report\n\n"
    yield "%s, playbook %s: **%d hosts**\n\n" % (md(report["generated_at"]), md(report.get("playbook")), totals["hosts"])
    statuses = [s for s in views.STATUS_ORDER if s in totals]
    yield from _table([md(views.status_label(s)) for s in statuses], [[str(totals[s]) for s in statuses]])
    for problem in analysis.get("problems") or []:
        yield "> **Problem:** %s\n\n" % md(problem)

    yield "## Failing checks by host\n\n"
    rows = []
    for host, status, checks in views.failing_by_host(report):
        for check_id, check_status, message, gpus in checks:
            rows.append([md(host), md(views.status_label(status)), md(check_id), md(check_status), md(message),
                         md(", ".join(gpus)) if gpus else "-"])
    if rows:
        yield from _table(["host", "host status", "check", "status", "message", "GPUs"], rows)
    else:
        yield "No failing checks.\n\n"

    if report["actions"]:
        yield "## Actions\n\n"
        yield from _table(["#", "status", "check", "hosts", "remediation"], (
            [str(n), md(a["status"]), md(a["check_id"]), str(a["host_count"]), md(a["remediation"] or "see the check's details")]
            for n, a in enumerate(report["actions"], 1)))

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

    bottleneck = analysis.get("bottleneck") or {}
    if bottleneck.get("primary"):
        yield "## Fleet bottleneck\n\n**%s** limits %d of %d profiled hosts.\n\n" % (
            md(bottleneck["primary"]), bottleneck["by_bottleneck"][0]["host_count"], bottleneck["hosts_with_verdict"])
        yield from _table(["#", "action", "bottlenecks", "hosts"], (
            [str(n), md(a["action"]), md(", ".join(a["bottlenecks"])), str(a["host_count"])]
            for n, a in enumerate(bottleneck["actions"], 1)))

    history = analysis.get("history") or {}
    if history:
        yield "## History (%d runs)\n\n" % history["runs"]
        if history["repeat_offenders"]:
            yield from _table(["host", "GPU", "failed in runs", "offences", "failing now"], (
                [md(o["host"]), md("GPU %s %s" % (o["index"], o["uuid"])) if o["kind"] == "gpu" else "-",
                 "%d of %d" % (o["runs_failed"], o["runs"]), md(", ".join(o["offences"])), "yes" if o["failing_now"] else "no"]
                for o in history["repeat_offenders"]))
        if history["degrading"]:
            yield from _table(["host", "GPU", "metric", "trend", "EWMA", "runs"], (
                [md(d["host"]), md("GPU %s %s" % (d["index"], d["uuid"])) if d["uuid"] else "-", md(d["metric"]),
                 md(views.percent_change(1.0 + d["trend"])), md(views.number(d["ewma"])), str(d["runs"])]
                for d in history["degrading"]))
        if not history["repeat_offenders"] and not history["degrading"]:
            yield "No repeat offenders, no degrading trends.\n\n"

    plan = analysis.get("batch_plan")
    if plan:
        yield "## Batch plan\n\n"
        if plan["error"]:
            yield "> **Problem:** %s\n\n" % md(plan["error"])
        else:
            yield "Global batch %d over %d GPUs by %s: expected step time %s vs uniform batches.\n\n" % (
                plan["global_batch_size"], plan["gpus_planned"], md(plan["metric"]),
                md(views.percent_change(1.0 - plan["expected_step_time_gain"])))
            yield from _table(["host", "batch", "per GPU"], (
                [md(host), str(entry["batch_size"]), md(" ".join(str(g["batch_size"]) for g in entry["gpus"]))]
                for host, entry in sorted(plan["hosts"].items())))
