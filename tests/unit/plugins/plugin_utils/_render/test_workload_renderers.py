"""The workload section in every format: each encodes the same analysis (_fleet/workloads.py), hostile strings included."""

import csv
import io
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._workload import run as workload_run
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import workloads
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import awx, html, json_report, junit, markdown, perf_csv, prometheus, terminal
from ansible_collections.continuum.hydra.tests.support.fleet_factory import REPO
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator
from ansible_collections.continuum.hydra.tests.support.prometheus import parse_prom

SLOW = "gpu-4"
BROKEN = 'gpu-<b>"5"</b>|&'
SKIPPER = "gpu-6"
ARGS = '--name "a,b"\n--x'


def _row(name, status, performance=None, **fields):
    # pylint: disable-next=protected-access
    return workload_run._row(name, ARGS, status, performance=performance,
                             metric="samples_per_second" if performance is not None else None, **fields)


@pytest.fixture(scope="module")
def report():
    collector = FleetCollector()
    speeds = {"gpu-1": "1000", "gpu-2": "1010", "gpu-3": "990", SLOW: "600"}
    for host, value in speeds.items():
        rows = [_row("bert", "SUCCESS", value, duration_s=12.5, log_tail=["performance: %s samples_per_second" % value])]
        collector.add_workload(host, workloads.host_entry({"mode": "run", "tags": ["fleet"], "catalogue": "/opt/MAD",
                                                          "workloads": rows, "summary": {}, "gpus": 8, "gpu_vendor": "AMD"}))
    for host, rows in ((BROKEN, [_row("bert", "FAILURE", reason="the script exited with status 1", exit_code=1,
                                      log_tail=["x", "RuntimeError: <oom> | `boom`"])]),
                       (SKIPPER, [_row("bert", "SKIPPED", reason="asks for 16 GPUs; this host has 8")])):
        collector.add_workload(host, workloads.host_entry({"mode": "run", "tags": ["fleet"], "catalogue": "/opt/MAD",
                                                          "workloads": rows, "summary": {}, "gpus": 8, "gpu_vendor": "AMD"}))
    built = collector.build("2026-11-24T13:00:00+00:00", "workloads.yml")
    return analyse(built, AnalysisOptions())


def _text(render, report):
    return "".join(render(report))


def test_the_analysis_behind_the_formats(report):
    section = report["workloads"]
    [table] = section["workloads"]["bert"]["tables"]
    assert table["class"] == "8 AMD GPUs" and [s["host"] for s in table["stragglers"]] == [SLOW]
    assert [f["host"] for f in section["workloads"]["bert"]["failures"]] == [BROKEN]


def test_json_carries_the_section_and_matches_the_schema(report):
    parsed = json.loads(_text(json_report.render, report))
    assert parsed["workloads"] == report["workloads"] and parsed["schema_version"] == "1.6.0"
    errors = sorted(schema_validator().iter_errors(parsed), key=lambda e: list(e.path))
    assert not errors, [(list(e.path), e.message) for e in errors[:5]]


def test_markdown_has_a_table_per_workload_and_class_and_escapes_the_failure(report):
    text = _text(markdown.render, report)
    assert "### bert\n" in text
    assert "| 8 AMD GPUs | samples\\_per\\_second | 4 | 995 | 600 | 1010 | gpu-4 -40% |" in text
    failure = [line for line in text.splitlines() if line.startswith("| gpu-&lt;b&gt;")]
    assert len(failure) == 1 and failure[0].count(" | ") == 4  # a | in the host name or log stays in its cell
    assert "RuntimeError: &lt;oom&gt; \\| `boom`" in failure[0]


def test_html_has_the_section_and_escapes_every_string(report):
    text = _text(html.render, report)
    section = text[text.index('<section id="workloads">'):]
    section = section[:section.index("</section>")]
    assert "<h3>bert</h3>" in section and '<tr class="straggler">' in section
    assert "gpu-&lt;b&gt;&quot;5&quot;&lt;/b&gt;|&amp;" in section and "<b>" not in section


def test_junit_has_one_testcase_per_host_and_workload(report, tmp_path):
    text = _text(junit.render, report)
    cases = dict((c.get("classname"), c) for c in ET.fromstring(text).iter("testcase") if c.get("name") == "workload.bert")
    assert len(cases) == 6
    assert cases[BROKEN].find("failure").get("message").startswith("FAILURE: the script exited with status 1")
    assert cases[SKIPPER].find("skipped") is not None
    assert "slower than class 8 AMD GPUs" in cases[SLOW].find("system-out").text
    assert list(cases["gpu-1"]) == [] and cases["gpu-1"].get("time") == "12.500"
    if shutil.which("xmllint"):
        path = tmp_path / "fleet-report.junit.xml"
        path.write_text(text, encoding="utf-8")
        proc = subprocess.run(["xmllint", "--noout", "--schema", os.path.join(REPO, "schemas", "junit.xsd"), str(path)],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr


def test_prometheus_gauges_performance_status_and_stragglers(report):
    samples = parse_prom(_text(prometheus.render, report))
    perf = dict((s[1]["host"], (s[1]["workload"], s[1]["metric"], s[2])) for s in samples if s[0] == "hydra_workload_performance")
    assert perf == {"gpu-1": ("bert", "samples_per_second", 1000.0), "gpu-2": ("bert", "samples_per_second", 1010.0),
                    "gpu-3": ("bert", "samples_per_second", 990.0), SLOW: ("bert", "samples_per_second", 600.0)}
    status = dict((s[1]["host"], (s[1]["status"], s[1]["failure"])) for s in samples if s[0] == "hydra_workload_status")
    assert status[BROKEN] == ("FAILURE", "true") and status[SKIPPER] == ("SKIPPED", "false") and status["gpu-1"] == ("SUCCESS", "false")
    slow = [s[1]["host"] for s in samples if s[0] == "hydra_workload_straggler" and s[2] == 1]
    assert slow == [SLOW]


def test_terminal_and_awx_summarise(report):
    lines = terminal.render(report)
    texts = [text for text, _colour in lines]
    assert "Workloads: 1 on 6 hosts: 4 SUCCESS, 1 FAILURE, 1 SKIPPED" in texts
    assert any(t.startswith("  SLOW  bert") and "gpu-4 -40%" in t for t in texts)
    assert ("  FAIL  %-20s %s: FAILURE, the script exited with status 1" % ("bert", BROKEN), "red") in lines
    data = awx.set_stats_data(report)[awx.STATS_KEY]
    assert data["workload_counts"]["SUCCESS"] == 4 and data["workload_failed_hosts"] == [BROKEN]
    assert data["workload_straggler_hosts"] == [SLOW]


def test_perf_csv_has_madengine_header_and_quotes_what_csv_must(report):
    text = _text(perf_csv.render, report)
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    assert tuple(reader.fieldnames) == perf_csv.HEADER and len(perf_csv.HEADER) == 29
    assert [r["machine_name"] for r in rows] == sorted(report["hosts"])
    assert rows[0]["args"] == ARGS.replace("\n", "\ufffd")  # a control character never splits a row
    by_host = dict((r["machine_name"], r) for r in rows)
    assert by_host[BROKEN]["status"] == "FAILURE" and by_host[BROKEN]["performance"] == ""
    assert by_host[SLOW]["performance"] == "600" and by_host[SLOW]["gpu_architecture"] == "AMD"
    assert by_host["gpu-1"]["n_gpus"] == "8" and by_host["gpu-1"]["test_duration"] == "12.5"


def test_timeout_is_failure_in_perf_csv_as_madengine_writes_it():
    collector = FleetCollector()
    # pylint: disable-next=protected-access
    rows = [workload_run._row("bert", "", "TIMEOUT", reason="killed at the 60s deadline")]
    collector.add_workload("h", workloads.host_entry({"mode": "run", "tags": [], "workloads": rows, "summary": {}, "gpus": 0}))
    report = analyse(collector.build("2026-11-24T13:00:00+00:00", "workloads.yml"), AnalysisOptions())
    [row] = list(csv.DictReader(io.StringIO(_text(perf_csv.render, report))))
    assert row["status"] == "FAILURE"
