"""Root causes and actions keyed by (check, status), on the four-host fleet of issue 13.

One host healthy, one with uncorrectable ECC errors (and persistence mode off), one whose nvidia-smi hangs, one whose
GPU fell off the bus. Each host result is made by doctor's own run() over a probe table: recorded nvidia-smi XML
(tests/fixtures/nvidia-smi) with faults planted on a copy, the GPU-loss kernel log recorded in tests/fixtures/kernel-log
scanned by the collection's own scanner; the fleet report by the production collector, the formats by the renderers.
"""

import copy
import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, FAILED, HEALTHY, SKIP, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, json_report, junit, markdown, prometheus, terminal
from ansible_collections.continuum.hydra.tests.support.fleet_factory import recorded_smi
from ansible_collections.continuum.hydra.tests.support.helpers import REPO, read_fixture

SELECTED = ["driver", "gpu", "cuda.driver_version"]
HANG = "nvidia-smi -q -x timed out after 10s"
LOST_LOG = "gpu-lost-no-xid-nvsentinel-155.txt"  # "NVRM: The NVIDIA GPU 0000:b3:00.0 ... has fallen off the bus"


def _absent(options):
    raise ProbeAbsent("not on this test host")


def _kernel_log(text):
    def probe(options):
        return dict(xid.scan(text, None), source="journalctl", journal_problem=None, window_hours=24, window_applied=True)
    return probe


def _smi(host, persistence="Enabled", uncorrectable=0):
    """The recorded A100's nvidia-smi data, on a copy: this host's own UUID and serial, the planted faults."""
    smi = copy.deepcopy(recorded_smi("a100-sxm4-v12.xml"))
    gpu = smi["gpus"][0]
    gpu["uuid"] = "GPU-%08x-0000-0000-0000-000000000000" % (sum(map(ord, host)) * 7919)
    gpu["serial"] = "16505220%05d" % sum(map(ord, host))
    gpu["persistence_mode"] = persistence
    for scope in ("volatile", "aggregate"):
        gpu["ecc"][scope]["uncorrectable"] = gpu["ecc"][scope]["dram_uncorrectable"] = uncorrectable
    return smi


def _host(host, smi=None, kernel_log=""):
    def hung(options):
        raise ProbeError(HANG)
    table = dict((name, _absent) for name in probe_catalogue.PROBES)
    table.update(host=lambda options: {"hostname": host}, kernel_log=_kernel_log(kernel_log),
                 nvidia_smi=(lambda options: smi) if smi is not None else hung)
    return _doctor.run(only=SELECTED, probes=table)


@pytest.fixture(scope="module")
def results():
    return {
        "healthy": _host("healthy", _smi("healthy")),
        "ecc": _host("ecc", _smi("ecc", persistence="Disabled", uncorrectable=3)),
        "hung": _host("hung"),
        "lost": _host("lost", _smi("lost"), read_fixture("kernel-log", LOST_LOG)),
    }


@pytest.fixture(scope="module")
def report(results):
    collector = FleetCollector()
    for host, result in results.items():
        collector.add_doctor(host, result)
    return collector.build("2026-11-23T08:00:00+00:00", "doctor.yml")


def _status(results, host, check_id):
    record = next(c for c in results[host]["checks"] if c["id"] == check_id)
    return record["status"], record.get("blocked_by")


def test_the_planted_faults_reach_the_checks(results):
    assert results["healthy"]["overall_status"] == HEALTHY
    assert _status(results, "ecc", "gpu.ecc_errors") == (FAIL, None)
    assert _status(results, "ecc", "gpu.persistence_mode") == (WARN, None)
    assert _status(results, "hung", "driver.nvidia_smi") == (ERROR, None)
    assert _status(results, "lost", "gpu.xid_errors") == (FAIL, None)


def test_every_action_lists_exactly_the_hosts_with_that_check_at_that_status(report, results):
    assert report["actions"]
    for action in report["actions"]:
        expected = sorted(h for h in results if _status(results, h, action["check_id"]) == (action["status"], None))
        assert action["hosts"] == expected, action
        assert action["host_count"] == len(expected)
    keys = [(a["check_id"], a["status"]) for a in report["actions"]]
    assert len(keys) == len(set(keys))


def test_the_hung_host_yields_one_root_action_and_says_how_many_checks_it_blocked(report, results):
    hung = [(a["check_id"], a["status"]) for a in report["actions"] if "hung" in a["hosts"]]
    assert hung == [("driver.nvidia_smi", ERROR)]
    action = next(a for a in report["actions"] if a["check_id"] == "driver.nvidia_smi")
    assert action["hosts"] == ["hung"] and "reset the GPU or reboot" in action["remediation"]
    blocked = [c for c in results["hung"]["checks"] if c.get("blocked_by")]
    assert len(blocked) >= 15 and all(c["status"] == SKIP and c["blocked_by"] == "driver.nvidia_smi" for c in blocked)
    assert all(HANG in c["message"] for c in blocked)  # the reason stays readable on every blocked check
    entry = report["hosts"]["hung"]
    assert entry["roots"] == [{"check_id": "driver.nvidia_smi", "status": ERROR,
                               "message": "nvidia-smi failed: %s" % HANG, "blocked": len(blocked)}]
    assert entry["failing_checks"] == ["driver.nvidia_smi"] and entry["status"] == "error"
    assert all(h["host"] != "hung" for cid, hosts in report["failing"].items() if cid != "driver.nvidia_smi" for h in hosts)
    assert all(report["hosts"][h]["roots"] == [] for h in ("healthy", "ecc", "lost"))


def test_the_lost_gpu_host_is_failed(report):
    assert report["hosts"]["lost"]["status"] == FAILED
    assert ("gpu.xid_errors", FAIL, ["lost"]) in [(a["check_id"], a["status"], a["hosts"]) for a in report["actions"]]
    assert report["hosts"]["healthy"]["status"] == HEALTHY


def test_ecc_fail_lists_only_the_ecc_host_with_the_ecc_remediation(report, results):
    ecc = [a for a in report["actions"] if a["check_id"] == "gpu.ecc_errors"]
    assert [(a["status"], a["hosts"]) for a in ecc] == [(FAIL, ["ecc"])]
    ecc_record = next(c for c in results["ecc"]["checks"] if c["id"] == "gpu.ecc_errors")
    assert ecc[0]["remediation"] == ecc_record["remediation"] and ecc[0]["remediation"]
    persistence = [(a["status"], a["hosts"]) for a in report["actions"] if a["check_id"] == "gpu.persistence_mode"]
    assert persistence == [(WARN, ["ecc"])]  # WARN, not the hung host's blocked check as an ERROR


def test_actions_are_ranked_by_severity_then_hosts_affected(report):
    rank = {FAIL: 0, ERROR: 1, WARN: 2}
    keys = [(rank[a["status"]], -a["host_count"]) for a in report["actions"]]
    assert keys == sorted(keys)
    assert report["actions"][0]["status"] == FAIL


def test_the_json_report_matches_the_schema(report):
    with open(_schema_path()) as handle:
        schema = json.load(handle)
    data = json.loads("".join(json_report.render(report)))
    jsonschema.validate(data, schema)
    assert data["hosts"]["hung"]["roots"][0]["blocked"] > 0
    assert any(c.get("blocked_by") == "driver.nvidia_smi" for c in data["hosts"]["hung"]["doctor"]["checks"])


def _schema_path():
    return "%s/schemas/fleet-report.schema.json" % REPO


def test_renderers_show_the_root_with_its_blocked_count_and_not_the_blocked_checks(report, results):
    blocked = report["hosts"]["hung"]["roots"][0]["blocked"]
    phrase = "blocked %d checks" % blocked
    text = "\n".join(line for line, _colour in terminal.render(report))
    assert "driver.nvidia_smi" in text and "hung (%s)" % phrase in text
    assert "gpu.temperature" not in text
    md = "".join(markdown.render(report))
    page = "".join(html.render(report))
    for body in (md, page):
        assert phrase in body
    hung_rows = [line for line in md.splitlines() if line.startswith("| ERROR | driver.nvidia\\_smi | hung |")]
    assert len(hung_rows) == 1 and "nvidia" in hung_rows[0]
    prom = "".join(prometheus.render(report))
    assert 'hydra_host_root_blocked_checks{host="hung",check="driver.nvidia_smi",status="ERROR"} %d' % blocked in prom
    assert 'hydra_host_check_problem{host="hung",check="gpu.temperature"' not in prom
    suites = ET.fromstring("".join(junit.render(report)))
    cases = dict((c.get("name"), c) for c in suites.iter("testcase") if c.get("classname") == "hung")
    assert cases["driver.nvidia_smi"].find("error") is not None and phrase in cases["driver.nvidia_smi"].find("error").get("message")
    skipped = cases["gpu.temperature"].find("skipped")
    assert skipped is not None and skipped.get("message").startswith("blocked by driver.nvidia_smi: ")
    hung_suite = next(s for s in suites.iter("testsuite") if s.get("name") == "hung")
    assert hung_suite.get("errors") == "1"
