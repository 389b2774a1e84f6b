"""Every format rendered from one hostile fleet report: parsed back with a real parser, strings round-trip
exactly, nothing injected (the browser, promtool and node_exporter checks are in tests/integration)."""

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._render import awx, formats, html, json_report, junit, markdown, prometheus, terminal
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import printable
from ansible_collections.continuum.hydra.tests.support.fleet_factory import REPO
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import (
    DRIFTER,
    FAILING,
    HOSTILE_GPU_NAME,
    HOSTILE_HOSTS,
    HOSTILE_MESSAGE,
    STRAGGLER,
    UNREACHABLE,
    hostile_report,
    schema_validator,
)
from ansible_collections.continuum.hydra.tests.support.prometheus import parse_prom

ALL_HOSTS = HOSTILE_HOSTS + [UNREACHABLE]


@pytest.fixture(scope="module")
def report():
    return hostile_report()


def _text(render, report):
    return "".join(render(report))


def test_the_hostile_fleet_has_what_the_format_tests_look_for(report):
    analysis = report["analysis"]
    assert [s["host"] for s in analysis["stragglers"]["hosts"]] == [STRAGGLER]
    assert analysis["drift"]["hosts"] == [DRIFTER]
    assert report["hosts"][FAILING]["failing_checks"] == ["gpu.ecc_errors"]
    assert report["hosts"][UNREACHABLE]["status"] == "unreachable"


def test_json_streams_exactly_the_report_and_matches_its_schema(report):
    text = _text(json_report.render, report)
    parsed = json.loads(text)
    assert parsed == json.loads(json.dumps(report, default=dict))  # the history's series: a mapping made when read
    assert sorted(parsed["hosts"]) == sorted(ALL_HOSTS)
    errors = sorted(schema_validator().iter_errors(parsed), key=lambda e: list(e.path))
    assert not errors, "\n".join("%s: %s" % (list(e.path), e.message) for e in errors[:5])
    # one line per host entry: a diff of two reports shows which hosts changed
    assert text.count("\n") > len(ALL_HOSTS)


def test_the_schema_rejects_what_the_report_must_never_be(report):
    validator = schema_validator()
    broken = json.loads(json.dumps(report, default=dict))
    broken["hosts"][FAILING]["status"] = "sick"
    del broken["totals"]["unreachable"]
    broken["analysis"]["drift"]["items"][0]["basis"] = "guess"
    paths = sorted("/".join(str(p) for p in e.absolute_path) for e in validator.iter_errors(broken))
    assert paths == ["analysis/drift/items/0/basis", "hosts/%s/status" % FAILING, "totals"]


class _Collector(HTMLParser):
    def __init__(self):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.tags, self.text, self.attrs = set(), [], []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_self_contained_and_escapes_every_string(report):
    page = _text(html.render, report)
    parser = _Collector()
    parser.feed(page)
    assert parser.tags <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "section", "div", "b",
                           "ol", "ul", "li", "code", "details", "summary", "br", "table", "thead", "tbody", "tr", "th", "td",
                           "span", "svg", "rect", "text", "line", "circle", "polyline"}
    assert "script" not in parser.tags and "<b>A10G" not in page and "<script" not in page
    assert not re.search(r"""(?:src|href)\s*=""", page), "no external asset"
    data_hosts = [v for k, v in parser.attrs if k == "data-host"]
    for host in ALL_HOSTS:  # control characters replaced (_render/_text.printable), the rest whole
        assert printable(host, keep="\t\n\r") in data_hosts, host
    text = "".join(parser.text)
    # shown as text (in the class names), never as markup
    assert HOSTILE_GPU_NAME in text and HOSTILE_MESSAGE in text
    assert 'Content-Security-Policy" content="default-src \'none\'' in page


def test_markdown_escapes_markup_and_keeps_table_rows_whole(report):
    text = _text(markdown.render, report)
    assert "<script" not in text and "<b>" not in text and "<uncorrectable>" not in text
    assert re.sub(r"<br>", "", text).count("<") == 0
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    for row in rows:
        # a cell boundary is a pipe that is not backslash-escaped
        cells = len(re.findall(r"(?<!\\)\|", row)) - 1
        assert cells >= 1 and row.endswith(" |")
    failing = [r for r in rows if r.startswith("| FAIL | gpu.ecc\\_errors | line<br>break")]
    assert len(failing) == 1 and len(re.findall(r"(?<!\\)\|", failing[0])) == 6
    assert markdown.md("a|b") == "a\\|b" and markdown.md("x\ny") == "x<br>y" and markdown.md("<i>&") == "&lt;i&gt;&amp;"


def test_junit_has_one_testcase_per_host_and_check_and_round_trips_strings(report):
    text = _text(junit.render, report)
    root = ET.fromstring(text.encode("utf-8"))
    suites = root.findall("testsuite")
    assert sorted(s.get("name") for s in suites) == sorted(junit.attr(h) and h.replace("\x07", "\ufffd").replace("\x1b", "\ufffd")
                                                           for h in ALL_HOSTS)
    by_host = dict((s.get("name"), s) for s in suites)
    failing = by_host[FAILING]
    names = [c.get("name") for c in failing.findall("testcase")]
    checks = [c["id"] for c in report["hosts"][FAILING]["doctor"]["checks"]]
    assert names == checks + ["fleet.drift", "fleet.stragglers"]
    ecc = [c for c in failing.findall("testcase") if c.get("name") == "gpu.ecc_errors"][0]
    assert ecc.find("failure").get("message") == HOSTILE_MESSAGE
    assert "remediation: drain <node> & reset \"now\"" in ecc.find("failure").text
    assert [c.get("name") for c in by_host[UNREACHABLE].findall("testcase")] == ["host.reachable"]
    assert by_host[UNREACHABLE].find("testcase/error") is not None
    straggler = [c for c in by_host[STRAGGLER].findall("testcase") if c.get("name") == "fleet.stragglers"][0]
    assert "triad_gbps" in straggler.find("failure").get("message")
    drift = [c for c in by_host[DRIFTER].findall("testcase") if c.get("name") == "fleet.drift"][0]
    assert 'driver_version: 999.<b>"1"</b>&' in drift.find("failure").text
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites) == len(root.findall(".//testcase"))
    assert int(root.get("failures")) == len(root.findall(".//failure"))


@pytest.mark.skipif(not shutil.which("xmllint"), reason="xmllint (libxml2-utils, tests/utils/system-deps.sh) is not installed")
def test_junit_validates_against_the_schema(report, tmp_path):
    path = tmp_path / "fleet-report.junit.xml"
    path.write_text(_text(junit.render, report), encoding="utf-8")
    proc = subprocess.run(["xmllint", "--noout", "--schema", os.path.join(REPO, "schemas", "junit.xsd"), str(path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_prometheus_label_values_round_trip_and_families_are_whole(report):
    text = _text(prometheus.render, report)
    samples = parse_prom(text)
    status = dict((s[1]["host"], s[1]["status"]) for s in samples if s[0] == "hydra_host_status" and s[2] == 1)
    expected = dict((printable(h.replace("\r\n", "\n")), e["status"]) for h, e in report["hosts"].items())
    assert status == expected
    problems = sorted((s[1]["check"], s[1]["status"]) for s in samples if s[0] == "hydra_host_check_problem")
    assert problems == [("gpu.ecc_errors", "FAIL"), ("gpu.persistence_mode", "WARN")]
    drift = [s[1] for s in samples if s[0] == "hydra_host_drift"]
    assert [(d["host"], d["field"], d["value"]) for d in drift] == [(DRIFTER, "driver_version", '999.<b>"1"</b>&')]
    slow = [(s[1]["host"], s[1]["metric"], round(s[2], 1)) for s in samples if s[0] == "hydra_straggler_ratio"]
    assert slow == [(STRAGGLER, "triad_gbps", 0.7)]
    # every family's samples follow its own HELP/TYPE lines, and no family appears twice
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(families) == len(set(families))
    seen = []
    for name, _labels, _value in samples:
        if not seen or seen[-1] != name:
            assert name not in seen, "family %s is split" % name
            seen.append(name)
    assert prometheus.label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_terminal_summary_shows_the_analysis_in_colour_names(report):
    lines = terminal.render(report, ["/r/fleet-report.json"])
    text = "\n".join(t for t, dummy in lines)
    assert "DRIFT driver_version" in text and re.search(r'SLOW  triad_gbps +<script>alert\("x"\)</script> \(-(29|30|31)%\)', text)
    # a line break or an ANSI escape in a host name cannot break or recolour the terminal
    assert "line\\nbreak\\r\\nhost (GPU 1" in text
    assert terminal.render({"totals": dict(report["totals"]), "hosts": {"bell\x07-\x1b[31m-ctrl": {"status": "unreachable"}},
                            "failing": {}, "actions": []})[2] == ("  UNREACHABLE bell\\x07-\\x1b[31m-ctrl", "red")
    assert "Fleet analysis: 1 class, 1 host(s) unclassified" in text
    assert "Batch plan: 256 samples over 28 GPUs by bf16_tflops" in text
    colours = dict((t.split()[0], c) for t, c in lines if t.strip())
    assert colours["DRIFT"] == "yellow" and colours["SLOW"] == "red"


def test_awx_set_stats_data_lists_failing_hosts_and_the_analysis(report):
    data = awx.set_stats_data(report)["hydra_fleet"]
    assert data["failing_hosts"] == sorted([FAILING, UNREACHABLE])
    assert data["warning_hosts"] == [] and data["ok"] is False
    assert data["failing_checks"] == {"gpu.ecc_errors": 1}
    assert data["straggler_hosts"] == [STRAGGLER] and data["drift_hosts"] == [DRIFTER]
    assert data["totals"] == report["totals"]


def test_format_names_and_files():
    assert [f[1] for f in formats.FORMATS] == ["fleet-report.json", "fleet-report.md", "fleet-report.html",
                                               "fleet-report.junit.xml", "fleet-report.prom"]
    assert formats.unknown_formats(["json", "pdf", "prometheus"]) == ["pdf"]
    assert [f[0] for f in formats.selected(["prometheus", "json"])] == ["json", "prometheus"]


def _hung_host_report(host):
    """A fleet of one host whose nvidia-smi hangs, judged by doctor's own run() (root cause and blocked checks)."""
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
    from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
    from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector

    def absent(options):
        raise ProbeAbsent("not here")

    def hung(options):
        raise ProbeError("nvidia-smi -q -x timed out after 10s <&>")
    table = dict((name, absent) for name in probe_catalogue.PROBES)
    table.update(host=lambda options: {"hostname": host}, nvidia_smi=hung)
    collector = FleetCollector()
    collector.add_doctor(host, _doctor.run(only=["driver", "gpu"], exclude=["gpu.xid_errors"], probes=table))
    return collector.build("2026-11-23T08:00:00+00:00", "doctor.yml")


def test_a_root_cause_is_one_problem_in_every_format_with_its_blocked_count(tmp_path):
    host = HOSTILE_HOSTS[0]
    report = _hung_host_report(host)
    blocked = report["hosts"][host]["roots"][0]["blocked"]
    assert blocked > 10 and [(a["check_id"], a["status"]) for a in report["actions"]] == [("driver.nvidia_smi", "ERROR")]
    schema_validator().validate(json.loads(_text(json_report.render, report)))
    samples = parse_prom(_text(prometheus.render, report))
    assert [(s[1]["host"], s[1]["check"], s[2]) for s in samples if s[0] == "hydra_host_root_blocked_checks"] == [
        (host, "driver.nvidia_smi", blocked)]
    assert [s[1]["check"] for s in samples if s[0] == "hydra_host_check_problem"] == ["driver.nvidia_smi"]
    root = ET.fromstring(_text(junit.render, report))
    assert root.get("errors") == "1"
    assert len([s for s in root.iter("skipped") if s.get("message").startswith("blocked by driver.nvidia_smi: ")]) == blocked
    assert "blocked %d checks" % blocked in _text(markdown.render, report)
    assert "blocked %d checks" % blocked in _text(html.render, report)
    if shutil.which("xmllint"):
        path = tmp_path / "fleet-report.junit.xml"
        path.write_text(_text(junit.render, report), encoding="utf-8")
        proc = subprocess.run(["xmllint", "--noout", "--schema", os.path.join(REPO, "schemas", "junit.xsd"), str(path)],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
