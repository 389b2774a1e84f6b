"""Evidence bundles for failing GPUs, from a synthetic fleet whose failing host runs the real checks on a planted recording."""

import os
import xml.etree.ElementTree as ET

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.evidence import build_evidence, evidence_links, evidence_path, safe_name
from ansible_collections.continuum.hydra.tests.support import fleet_factory
from ansible_collections.continuum.hydra.tests.support.envelopes import ok as _ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

RECORDING = "a100-sxm4-v12.xml"
A100_UUID = "GPU-513536b6-7d19-9063-b049-1e69664bb298"
XID_48 = "2026-11-22T13:20:00,000000+00:00 NVRM: Xid (PCI:0000:01:00): 48, pid=4242, name=python, DBE (double bit error) detected"


def _planted_smi():
    """The recording with two uncorrectable DRAM errors since the driver loaded on its GPU."""
    root = ET.fromstring(read_fixture("nvidia-smi", RECORDING))
    root.find("gpu/ecc_errors/volatile/dram_uncorrectable").text = "2"
    return parse_nvidia_smi(ET.tostring(root, encoding="unicode"))


def _judge(check_id, probes):
    return fleet_factory.judge(check_id, **probes)


def _fleet_with_ecc_host(host_name=None):
    """Three A100 hosts; the second (or host_name) runs gpu.ecc_errors and gpu.xid_errors on the planted recording."""
    fleet = fleet_factory.SyntheticFleet({"a100x8": 3})
    host = host_name or fleet.names("a100x8")[1]
    if host_name:
        fleet.hosts[host] = dict(fleet.hosts.pop(fleet.names("a100x8")[1]))
    smi = _planted_smi()
    _fixture, _count, cpu, memory = fleet_factory.CLASSES["a100x8"][:4]
    env = fleet_factory.environment(host, smi, smi["gpus"], cpu, memory)
    log = _ok(dict(xid.scan(XID_48 + "\n"), source="journalctl", journal_problem=None, window_hours=24, window_applied=True))
    probes = {"nvidia_smi": _ok(smi), "kernel_log": log}
    ecc, xids = _judge("gpu.ecc_errors", probes), _judge("gpu.xid_errors", probes)
    assert ecc["status"] == FAIL and xids["status"] == FAIL
    checks = [fleet_factory.check("gpu.persistence_mode"), ecc, xids]
    fleet.hosts[host]["doctor"] = fleet_factory.doctor_result(env, checks)
    return fleet, host


def test_the_failing_gpu_has_evidence_naming_its_serial_uuid_address_vbios_check_and_bug_report():
    fleet, host = _fleet_with_ecc_host()
    report = fleet.report()
    records = build_evidence(report)
    assert [(r["host"], r["uuid"]) for r in records] == [(host, A100_UUID)]
    (record,) = records
    recorded = parse_nvidia_smi(read_fixture("nvidia-smi", RECORDING))["gpus"][0]
    assert record["serial"] == recorded["serial"] == "1650522003820"
    assert record["board_part_number"] == "692-2G506-0212-002"
    assert (record["pci_bus_id"], record["vbios_version"], record["driver_version"]) == ("00000000:01:00.0", "92.00.36.00.02", "535.54.03")
    assert [c["id"] for c in record["failing_checks"]] == ["gpu.ecc_errors", "gpu.xid_errors"]
    ecc = record["failing_checks"][0]
    assert [g["uuid"] for g in ecc["details"]["gpus"]] == [A100_UUID]
    assert ecc["details"]["gpus"][0]["volatile"]["dram_uncorrectable"] == 2
    (event,) = record["kernel_log"]
    assert (event["xid"], event["count"], event["severity"]) == (48, 1, "critical") and "DBE" in event["last_message"]
    command = record["bug_report"]["command"]
    assert command.startswith("sudo nvidia-bug-report.sh --output-file /var/tmp/") and A100_UUID in command
    assert record["bug_report"]["output"].endswith(".log.gz")
    assert record["path"] == "evidence/%s/%s.json" % (host, A100_UUID)
    assert evidence_links(records) == [{"host": host, "uuid": A100_UUID, "pci_bus_id": "00000000:01:00.0",
                                        "serial": "1650522003820", "path": record["path"]}]


def test_a_healthy_fleet_has_no_evidence_and_warn_gpus_get_none():
    fleet = fleet_factory.SyntheticFleet({"a100x8": 3})
    host = fleet.names("a100x8")[0]
    gpus = fleet.hosts[host]["doctor"]["environment"]["gpus"]
    fleet.hosts[host]["doctor"]["checks"].append(fleet_factory.check("gpu.pcie_replay", WARN, gpus=gpus[:1]))
    assert build_evidence(fleet.report()) == []


def test_an_open_fail_finding_keeps_evidence_for_a_gpu_that_is_clean_now_and_a_closed_one_does_not():
    fleet = fleet_factory.SyntheticFleet({"a100x8": 3})
    host = fleet.names("a100x8")[2]
    gpu = fleet.hosts[host]["doctor"]["environment"]["gpus"][3]
    report = fleet.report()
    history = {"host": host, "check_id": "gpu.ecc_errors", "gpu_uuid": gpu["uuid"], "status": FAIL, "open": True,
               "first_seen": "2026-11-21T13:00:00+00:00", "last_seen": "2026-11-21T13:00:00+00:00", "times_seen": 1}
    report["findings"] = [history, dict(history, gpu_uuid=fleet.hosts[host]["doctor"]["environment"]["gpus"][4]["uuid"], open=False),
                          {"host": host, "check_id": "system.dev_shm", "gpu_uuid": None, "status": FAIL, "open": True}]
    (record,) = build_evidence(report)
    assert (record["host"], record["uuid"], record["index"], record["serial"]) == (host, gpu["uuid"], 3, gpu["serial"])
    assert record["failing_checks"] == [] and record["findings"] == [history]
    # Another host's open finding is its own, even on a GPU UUID it shares with this host's (a cloned recording).
    other = dict(history, host=fleet.names("a100x8")[0])
    report["findings"].append(other)
    records = build_evidence(report)
    assert [(r["host"], r["uuid"], r["findings"]) for r in records] == sorted([(host, gpu["uuid"], [history]),
                                                                               (other["host"], gpu["uuid"], [other])])


def test_a_host_name_with_dot_dot_slash_cannot_leave_the_evidence_dir(tmp_path):
    for host in ("../../etc", "..", "a/../../b", "/abs", "x\x00y", ".hidden"):
        path = evidence_path(host, "../" + A100_UUID)
        base = os.path.join(str(tmp_path), "evidence")
        full = os.path.normpath(os.path.join(str(tmp_path), *path.split("/")))
        assert full.startswith(base + os.sep) and os.path.dirname(os.path.dirname(full)) == base, (host, path)
        parts = path.split("/")
        assert len(parts) == 3 and not any(p.startswith(".") or p in ("", "..") for p in parts)
    assert safe_name("a/b") != safe_name("a_b") and safe_name("gpu-01") == "gpu-01"
    fleet, host = _fleet_with_ecc_host("../../outside")
    (record,) = build_evidence(fleet.report())
    assert record["host"] == "../../outside" and record["path"].startswith("evidence/") and ".." not in record["path"].split("/")
