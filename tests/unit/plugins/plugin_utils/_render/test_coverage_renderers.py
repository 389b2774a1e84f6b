"""Screening coverage in the human formats and Prometheus: the overdue nodes as a table (never screened first, then the
longest overdue, the rest collapsed into one row), and a gauge per node, on a section made by _fleet/coverage.py."""

import datetime
import json
import re
import shutil
import subprocess

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import coverage
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, json_report, markdown, prometheus
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator
from ansible_collections.continuum.hydra.tests.support.prometheus import parse_prom

NOW = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.timezone.utc)
OVERDUE = 25  # more than views.OVERDUE_SHOWN: the last ones share a row
NEVER = ["gpu-n%d" % i for i in range(5)]


def ago(days):
    return (NOW - datetime.timedelta(days=days)).isoformat(timespec="seconds")


def _report():
    """3 nodes screened within 7 days, OVERDUE nodes screened 8 to 32 days ago, NEVER never screened."""
    nodes = {"gpu-w%d" % i: {"last_screened": ago(1.0 + i)} for i in range(3)}
    nodes.update(("gpu-o%02d" % i, {"last_screened": ago(8.0 + i)}) for i in range(OVERDUE))
    store = {"version": coverage.STORE_VERSION, "nodes": nodes}
    collector = FleetCollector()
    collector.add_doctor("gpu-w0", {"schema_version": "1.2.0", "checks": [
        {"id": "gpu.ecc_errors", "status": "PASS", "message": "ok", "details": {}, "remediation": None}]})
    report = collector.build(NOW.isoformat(), "screen.yml")
    analyse(report, AnalysisOptions())
    # as the callback sets it (fleet_report.py _update_screening)
    report["screening"] = dict(coverage.coverage(store, list(nodes) + NEVER, {}, 7, NOW), max_nodes=10, problems=[])
    return report


def _text(render, report):
    return "".join(render(report))


def test_the_table_lists_the_never_screened_then_the_longest_overdue_and_collapses_the_rest():
    report = _report()
    rows = views.coverage_rows(report)
    assert len(rows) == 1 + views.OVERDUE_SHOWN + 1
    assert rows[0] == views.CoverageRow(NEVER, "never", "never screened")
    assert rows[1] == views.CoverageRow(["gpu-o24"], "2026-10-25 12:00", "25.0 days")  # 32 days ago, 7 allowed
    assert rows[views.OVERDUE_SHOWN] == views.CoverageRow(["gpu-o05"], "2026-11-13 12:00", "6.0 days")
    last = rows[-1]
    assert last.hosts == ["gpu-o04", "gpu-o03", "gpu-o02", "gpu-o01", "gpu-o00"]
    assert (last.last_screened, last.overdue_by) == ("2026-11-14 12:00 to 2026-11-18 12:00", "1.0 days to 5.0 days")
    assert views.coverage_line(report) == ("Screening: 3 of 33 nodes screened within 7 days; 25 overdue (longest: gpu-o24 "
                                           "by 25.0 days); 5 never screened")
    schema_validator().validate(json.loads(_text(json_report.render, report)))


def test_markdown_and_html_show_the_table_with_the_groups_collapsed():
    report = _report()
    text = _text(markdown.render, report)
    section = text[text.index("## Screening coverage"):]
    section = section[:section.index("\n## ") if "\n## " in section else len(section)]
    assert "| hosts | last screened | overdue by |" in section
    assert "| **5 hosts**: gpu-n0, gpu-n1, gpu-n2, gpu-n3, gpu-n4 | never | never screened |" in section
    assert "| gpu-o24 | 2026-10-25 12:00 | 25.0 days |" in section
    assert "| **5 hosts**: gpu-o04, gpu-o03, gpu-o02, gpu-o01, gpu-o00 | 2026-11-14 12:00 to 2026-11-18 12:00 |" in section
    # the header, the never screened, the first overdue one row each, the rest: under Markdown's cap, nothing cut
    assert section.count("\n| ") == 1 + 1 + views.OVERDUE_SHOWN + 1 and "Only the first" not in section
    page = _text(html.render, report)
    block = page[page.index('<section id="screening">'):]
    block = block[:block.index("</section>")]
    table = block[block.index('<table id="coverage-table">'):]
    assert table.count("<tr") == 1 + 1 + views.OVERDUE_SHOWN + 1
    assert re.search(r'<tr data-hosts="5" class="group"><td><details><summary><b>5 hosts</b>: gpu-n0, gpu-n1, gpu-n2 \+2 '
                     r'more</summary><p class="hosts">gpu-n0<br>gpu-n1<br>gpu-n2<br>gpu-n3<br>gpu-n4</p></details></td>'
                     r'<td>never</td><td>never screened</td></tr>', table)
    assert '<tr data-host="gpu-o24"><td>gpu-o24</td><td>2026-10-25 12:00</td><td>25.0 days</td></tr>' in table


def test_no_screening_no_section():
    report = _report()
    del report["screening"]
    assert "Screening coverage" not in _text(markdown.render, report) and 'id="screening"' not in _text(html.render, report)
    assert not [s for s in parse_prom(_text(prometheus.render, report)) if "screen" in s[0]]


def test_prometheus_has_each_nodes_age_the_overdue_and_the_never_screened():
    samples = parse_prom(_text(prometheus.render, _report()))
    ages = dict((labels["host"], value) for name, labels, value in samples if name == "hydra_node_screened_age_seconds")
    assert len(ages) == 3 + OVERDUE and ages["gpu-w0"] == 86400.0 and ages["gpu-o24"] == 32 * 86400.0
    overdue = dict((labels["host"], value) for name, labels, value in samples if name == "hydra_node_screening_overdue_seconds")
    assert len(overdue) == OVERDUE and overdue["gpu-o00"] == 86400.0 and "gpu-w0" not in overdue
    assert sorted(labels["host"] for name, labels, _v in samples if name == "hydra_node_never_screened") == NEVER
    assert [value for name, _labels, value in samples if name == "hydra_screening_max_age_seconds"] == [7 * 86400.0]


@pytest.mark.skipif(not shutil.which("promtool"), reason="needs promtool (tests/utils/system-deps.sh installs it)")
def test_the_screening_gauges_pass_promtool():
    proc = subprocess.run(["promtool", "check", "metrics"], input=_text(prometheus.render, _report()), capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
