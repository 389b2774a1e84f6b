"""The fabric section in every format: one report from the planner's state on a simulated fabric (n06 slow among 8,
an n02 that never joined), collected the way the callback collects playbooks/fabric.yml's last planner result."""

import json
import re

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import fabric as planner
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import findings
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _fabric as fabric_views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, json_report, junit, markdown, prometheus, terminal
from ansible_collections.continuum.hydra.tests.support.fabric import SimulatedFabric, isolate
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator
from ansible_collections.continuum.hydra.tests.support.prometheus import parse_prom


@pytest.fixture(scope="module")
def fabric_report():
    state = isolate(SimulatedFabric(8, slow=(6,), noise=0, absent={1: ("n02",)}))
    collector = FleetCollector()
    collector.add_doctor("n00", {"schema_version": "1.2.0", "checks": [
        {"id": "gpu.ecc_errors", "status": "PASS", "message": "ok", "details": {}, "remediation": None}]})
    collector.add_fabric(planner.section(state), planner.host_checks(state))
    report = collector.build("2026-11-26T12:00:00+00:00", "fabric.yml")
    analyse(report, AnalysisOptions())
    return state, report


def _text(render, report):
    return "".join(render(report))


def test_every_host_gets_its_fabric_checks_and_the_verdicts_follow(fabric_report):
    state, report = fabric_report
    assert report["hosts"]["n06"]["status"] == "failed" and report["hosts"]["n06"]["failing_checks"] == ["fabric.collective"]
    assert report["hosts"]["n02"]["status"] == "error"
    assert report["hosts"]["n03"]["status"] == "healthy"
    # doctor's own checks stay beside the fabric ones
    assert [c["id"] for c in report["hosts"]["n00"]["doctor"]["checks"]] == ["gpu.ecc_errors", "fabric.collective", "fabric.link"]
    assert report["failing"]["fabric.collective"][0]["host"] == "n02"
    actions = {(a["check_id"], a["status"]): a for a in report["actions"]}
    assert actions[("fabric.collective", "FAIL")]["hosts"] == ["n06"]
    assert actions[("fabric.collective", "FAIL")]["remediation"].startswith("Drain the node; check its fabric NIC")
    assert report["fabric"]["isolated"][0]["host"] == "n06" and report["fabric"] == planner.section(state)
    schema_validator().validate(json.loads(_text(json_report.render, report)))


def test_findings_open_for_the_isolated_host(fabric_report):
    _state, report = fabric_report
    state = findings.update(findings.read_store("/nonexistent/findings.json", [], None), report)
    opened = {(f["host"], f["check_id"]) for f in findings.listing(state)}
    assert ("n06", "fabric.collective") in opened and ("n02", "fabric.collective") in opened


def test_markdown_html_terminal_and_junit_carry_the_rounds_and_the_proof(fabric_report):
    state, report = fabric_report
    proof = planner.proof_line(state, "n06")
    text = _text(markdown.render, report)
    section = text[text.index("## Fabric"):]
    assert "isolated n06 (%s)" % proof.replace("<", "&lt;") in section and "ERROR: n02 (did not join)" in section
    assert section.count("| r") >= len(fabric_views.round_rows(report))
    page = _text(html.render, report)
    block = page[page.index('<section id="fabric">'):]
    block = block[:block.index("</section>")]
    svg = block[block.index("<svg"):block.index("</svg>")]
    assert svg.count('<g class="group"') == sum(len(r["groups"]) for r in report["fabric"]["rounds"])
    assert re.search(r'data-verdict="below">.*?class="member isolated" data-host="n06"', svg)
    assert 'data-verdict="incomplete"' in svg and "data-host=\"n06\"" in block
    lines = [text for text, _colour in terminal.render(report, [])]
    assert any(line.startswith("Fabric: ") and "isolated n06" in line for line in lines)
    xml = _text(junit.render, report)
    assert re.search(r'<testcase classname="n06" name="fabric.collective"[^>]*>\s*<failure', xml)
    assert '<testcase classname="n03" name="fabric.collective" time="0.000"/>' in xml


def test_prometheus_gauges_per_host(fabric_report):
    state, report = fabric_report
    samples = parse_prom(_text(prometheus.render, report))
    isolated = {s[1]["host"]: s[2] for s in samples if s[0].endswith("fabric_isolated")}
    assert isolated == {h: (1.0 if h == "n06" else 0.0) for h in state["hosts"]}
    busbw = {s[1]["host"]: s[2] for s in samples if s[0].endswith("fabric_busbw_gbps")}
    assert busbw["n06"] == pytest.approx(1.0) and busbw["n03"] == pytest.approx(10.0)
    assert "n02" not in busbw
    assert [s[1] for s in samples if s[0].endswith("fabric_error")] == [{"host": "n02", "kind": "did not join"}]
    assert [s[2] for s in samples if s[0].endswith("fabric_rounds")] == [len(state["rounds"])]


def test_evidence_for_the_isolated_host_holds_the_proof_and_its_groups(fabric_report):
    state, report = fabric_report
    (record,) = planner.fabric_evidence(report)
    assert record["path"] == "evidence/n06/fabric.json" and record["isolated"]["proof"] == planner.proof_line(state, "n06")
    assert {g["id"] for g in record["groups"]} >= set(state["bad"]["n06"]["groups"])
    assert any("ethtool -S" in command for command in record["collect"])


def test_a_busy_host_is_named_not_tested_in_the_line_and_as_a_gauge():
    busy = "node busy (SLURM job 4 (train, user alice, running)); force: true loads it anyway"
    state = isolate(SimulatedFabric(4), busy={"n03": busy})
    collector = FleetCollector()
    collector.add_fabric(planner.section(state), planner.host_checks(state))
    report = collector.build("2026-11-26T12:00:00+00:00", "fabric.yml")
    analyse(report, AnalysisOptions())
    assert fabric_views.line(report).endswith("3 of 3 proven good; not tested, busy: n03")
    assert "not tested, busy: n03" in _text(markdown.render, report) and "not tested, busy: n03" in _text(html.render, report)
    samples = parse_prom(_text(prometheus.render, report))
    assert [(s[1], s[2]) for s in samples if s[0].endswith("fabric_not_tested_busy")] == [({"host": "n03"}, 1.0)]
    assert "n03" not in {s[1]["host"] for s in samples if s[0].endswith("fabric_isolated")}
    schema_validator().validate(json.loads(_text(json_report.render, report)))
