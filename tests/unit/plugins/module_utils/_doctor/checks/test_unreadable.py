"""Unreadable is not healthy: error strings, all-N/A fields, vGPU placeholders, recovery actions and numbers beyond
range, planted by editing copies of the recorded nvidia-smi output (tests/fixtures/nvidia-smi)."""

import functools
import json
import sys
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.per_gpu import GPU_PROBES
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.tests.support.envelopes import ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.nvidia import GPU_CHECKS, RECORDINGS, blank_readings, leaves, smi

# Checks judging only nvidia-smi's per-GPU values (the ones this file plants faults for).
VALUE_CHECKS = [c for c in GPU_CHECKS if c.probes in (("nvidia_smi",), GPU_PROBES)
                and c.id.startswith("gpu.")]
# Spellings as nvidia-smi prints them (sources in tests/fixtures/nvidia-smi/README.md).
ERROR_STRINGS = ("Unknown Error", "[Unknown Error]", "ERR!", "Insufficient Permissions", "[Not Found]")
LOST_STRINGS = ("GPU is lost", "[GPU requires reset]")
# Which check reads which record field: what each check declares, as the tests know it.
READS = {
    "gpu.persistence_mode": ("persistence_mode",), "gpu.ecc_mode": ("ecc.current", "ecc.pending"),
    "gpu.mig": ("mig.current", "mig.pending"),
    "gpu.ecc_errors": ("ecc.volatile", "ecc.aggregate", "ecc.sram_threshold_exceeded"),
    "gpu.row_remap": ("remapped_rows", "retired_pages", "repair"),
    "gpu.pcie_link": ("pcie.gen_current", "pcie.gen_max", "pcie.gen_device_max", "pcie.gen_host_max",
                      "pcie.width_current", "pcie.width_max", "utilization.gpu_pct"),
    "gpu.pcie_replay": ("pcie.replay_counter", "pcie.replay_rollover_counter"),
    "gpu.clock_throttle_reasons": ("clock_event_reasons",), "gpu.temperature": ("temperature",),
    "gpu.power": ("power",),
    "gpu.clocks": ("clocks", "max_clocks", "applications_clocks", "default_applications_clocks", "utilization.gpu_pct"),
    "gpu.recovery_action": ("recovery",), "gpu.vgpu_license": ("vgpu_license",),
}


def judge_all(data, expect=None):
    probes = {"nvidia_smi": ok(data), "amd_smi": {"status": "absent", "data": None, "reason": "no AMD GPU", "duration_ms": 0.0}}
    return dict((c.id, registry.evaluate(c, probes, expect or {})) for c in VALUE_CHECKS)


@functools.cache
def field_map(name):
    """{element path: record field path} for every element the parser reads, found by planting an error in each."""
    found = {}
    for index, (_unused, path) in enumerate(leaves(ET.fromstring(read_fixture("nvidia-smi", name)))):
        def edit(root, index=index):
            leaves(root)[index][0].text = "Unknown Error"
        unreadable = smi(name, edit)["gpus"][0]["unreadable"]
        if unreadable:
            found[(index, path)] = sorted(unreadable)
    return found


def readers_of(field):
    return [cid for cid, fields in READS.items() if any(field == f or field.startswith(f + ".") for f in fields)]


def test_the_tests_know_what_each_check_reads():
    modules = dict((c.id, sys.modules[c.func.__module__]) for c in VALUE_CHECKS)
    for cid in READS:
        constant = "_READS_" + cid.split(".", 1)[1].upper()
        assert tuple(getattr(modules[cid], constant)) == READS[cid], cid
    assert set(READS) == set(c.id for c in VALUE_CHECKS) - {"gpu.model"}


@pytest.mark.parametrize("name", RECORDINGS)
def test_each_error_string_in_each_field_is_error_or_fail_on_the_right_gpu_never_pass(name):
    strings = ERROR_STRINGS + LOST_STRINGS
    mapping = field_map(name)
    assert mapping, "the parser reads values from the recording"
    for number, ((index, path), fields) in enumerate(sorted(mapping.items())):
        text = strings[number % len(strings)]

        def edit(root, index=index, text=text):
            leaves(root)[index][0].text = text
        data = smi(name, edit)
        gpu = data["gpus"][0]
        assert sorted(gpu["unreadable"]) == fields and all(v == text for v in gpu["unreadable"].values()), path
        records = judge_all(data)
        lost = text in LOST_STRINGS
        for field in fields:
            for cid in readers_of(field):
                record = records[cid]
                want = ("FAIL",) if lost else ("ERROR", "FAIL")
                assert record["status"] in want, (path, text, cid, record["message"])
                assert any(field in (g.get("unreadable") or {}) and g["index"] == 0 and g["uuid"] == gpu["uuid"]
                           for g in record["details"]["gpus"]), (path, cid)
                assert field in record["message"] and record["remediation"], (path, cid)
                if lost:
                    assert "reset" in record["remediation"] and "reboot" in record["remediation"]
        if lost:
            record = records["gpu.recovery_action"]
            assert record["status"] == "FAIL" and "lost or needing a reset" in record["message"], path
        for record in records.values():
            assert not record["message"].startswith("check crashed"), (path, record["message"])


def test_lost_gpu_is_fail_in_a_multi_gpu_host_and_names_only_that_gpu():
    def edit(root):
        import copy
        clone = copy.deepcopy(root.find("gpu"))
        clone.find("uuid").text = "GPU-deadbeef-0000-0000-0000-000000000001"
        clone.find("pci/pci_bus_id").text = "00000000:02:00.0"
        for element in clone.iter():
            if element.tag in ("gpu_temp", "average_power_draw", "sm_clock", "replay_counter"):
                element.text = "GPU is lost"
        root.append(clone)
    data = smi("rtx-3080-v13.xml", edit)
    records = judge_all(data)
    for cid in ("gpu.temperature", "gpu.power", "gpu.clocks", "gpu.pcie_replay", "gpu.recovery_action"):
        record = records[cid]
        assert record["status"] == "FAIL", (cid, record["message"])
        assert [g["index"] for g in record["details"]["gpus"]] == [1], cid
        assert "GPU 1 00000000:02:00.0 GPU-deadbeef-0000-0000-0000-000000000001:" in record["message"]


@pytest.mark.parametrize("name", RECORDINGS)
def test_all_na_fields_of_a_check_are_skip_nothing_readable_never_pass(name):
    mapping = field_map(name)
    for cid in READS:
        elements = [index for (index, _unused), mapped in mapping.items() if any(cid in readers_of(f) for f in mapped)]
        if not elements:
            continue
        if "ecc.volatile" in READS[cid]:  # MIG devices' own counts stand in for the GPU's volatile ones when N/A
            elements += [index for index, (_unused, path) in enumerate(leaves(ET.fromstring(read_fixture("nvidia-smi", name))))
                         if "/ecc_error_count/" in path]

        def edit(root, elements=elements):
            nodes = leaves(root)
            for index in elements:
                nodes[index][0].text = "N/A"
        record = judge_all(smi(name, edit))[cid]
        assert record["status"] == "SKIP", (name, cid, record["message"])
        assert "nothing readable" in record["message"]


@pytest.mark.parametrize("check_id, container", [
    ("gpu.clock_throttle_reasons", "clocks_event_reasons"), ("gpu.row_remap", "remapped_rows")])
def test_checks_that_read_nothing_skip(check_id, container):
    def edit(root):
        for node in root.find("gpu").iter():
            if node.tag.startswith(container.rstrip("s")) or node.tag.startswith("clocks_throttle_reason") \
                    or node.tag.startswith("remapped_row") or node.tag in ("max", "high", "partial", "low", "none"):
                if len(node) == 0:
                    node.text = "N/A"
    record = judge_all(smi("rtx-3080-v13.xml", edit))[check_id]
    assert record["status"] == "SKIP" and "nothing readable" in record["message"], record["message"]


@pytest.mark.parametrize("name", RECORDINGS)
def test_vgpu_guest_placeholders_are_skip(name):
    def edit(root):
        gpu = root.find("gpu")
        mode = gpu.find("gpu_virtualization_mode/virtualization_mode")
        mode.text = "VGPU"
        for node in gpu.iter():
            if node.tag in ("gpu_temp", "graphics_clock", "sm_clock", "mem_clock", "video_clock"):
                node.text = "0 C" if node.tag == "gpu_temp" else "0 MHz"
    records = judge_all(smi(name, edit))
    for cid in ("gpu.temperature", "gpu.clocks", "gpu.power"):
        assert records[cid]["status"] == "SKIP" and "vGPU guest" in records[cid]["message"], (cid, records[cid])


@pytest.mark.parametrize("action, words", [
    ("Reset", "reset it"), ("Reboot", "reboot"), ("Drain P2P", "peer-to-peer"), ("Drain and Reset", "Drain the node"),
    ("Some Future Action", "Some Future Action")])
@pytest.mark.parametrize("name", ("rtx-3060-v12.xml", "rtx-3080-v13.xml", "rtx-4000-sff-ada-v13.xml"))
def test_recovery_action_other_than_none_is_fail_with_that_action(name, action, words):
    def edit(root):
        root.find("gpu/gpu_recovery_action").text = action
    record = judge_all(smi(name, edit))["gpu.recovery_action"]
    assert record["status"] == "FAIL" and action in record["message"]
    assert words in record["remediation"]
    assert record["details"]["gpus"][0]["recovery_action"] == action


@pytest.mark.parametrize("element, words", [("reset_required", "reset it"), ("drain_and_reset_recommended", "Drain the node")])
def test_v12_reset_status_yes_is_fail(element, words):
    def edit(root):
        root.find("gpu/gpu_reset_status/" + element).text = "Yes"
    record = judge_all(smi("a100-sxm4-v12.xml", edit))["gpu.recovery_action"]
    assert record["status"] == "FAIL" and words in record["remediation"]


def test_recovery_fields_pass_when_none_and_skip_when_not_reported():
    assert judge_all(parse_nvidia_smi(read_fixture("nvidia-smi", "rtx-3080-v13.xml")))["gpu.recovery_action"]["status"] == "PASS"
    assert judge_all(parse_nvidia_smi(read_fixture("nvidia-smi", "a100-sxm4-v12.xml")))["gpu.recovery_action"]["status"] == "PASS"
    record = judge_all(parse_nvidia_smi(read_fixture("nvidia-smi", "tesla-t4.xml")))["gpu.recovery_action"]
    assert record["status"] == "SKIP" and "nothing readable" in record["message"]


HUGE = "9" * 5000


@pytest.mark.parametrize("element, check_id", [
    ("replay_counter", "gpu.pcie_replay"), ("gpu_temp", "gpu.temperature"), ("average_power_draw", "gpu.power"),
    ("sm_clock", "gpu.clocks"), ("current_link_width", "gpu.pcie_link"), ("gpu_util", "gpu.pcie_link"),
    ("dram_correctable", "gpu.ecc_errors"), ("remapped_row_unc", "gpu.row_remap")])
@pytest.mark.parametrize("value", (HUGE, "-" + HUGE, "1" + "0" * 30 + " W", "inf", "nan", "1e999"),
                         ids=("5000-digits", "-5000-digits", "1e30", "inf", "nan", "1e999"))
def test_numbers_beyond_range_are_error_never_a_crash(element, check_id, value):
    def edit(root):
        root.find("gpu").iter(element).__next__().text = value
    records = judge_all(smi("rtx-4000-sff-ada-v13.xml" if check_id == "gpu.row_remap" else "rtx-3080-v13.xml", edit))
    record = records[check_id]
    assert record["status"] == "ERROR", record["message"]
    if value[-1].isdigit() or value.endswith("W"):
        assert "value out of range" in record["message"]
    for rec in records.values():
        assert not rec["message"].startswith("check crashed"), rec["message"]
        json.dumps(rec, allow_nan=False)
        assert len(json.dumps(rec)) < 20000  # the 5000 digits are not copied into the result


@pytest.mark.parametrize("element, check_id", [
    ("replay_counter", "gpu.pcie_replay"), ("gpu_temp", "gpu.temperature"), ("average_power_draw", "gpu.power"),
    ("sm_clock", "gpu.clocks"), ("current_link_width", "gpu.pcie_link"), ("dram_uncorrectable", "gpu.ecc_errors")])
@pytest.mark.parametrize("value", ("0x10", "-1 C", str(2 ** 64), "2^64", "1.5.3"))
def test_a_hex_negative_or_2_to_the_64_reading_is_error_never_pass(element, check_id, value):
    # Issue 23: "0x10" used to read as 0, "2^64" as 2, "-1 C" as -1 C, 2**64 as a count: each a PASS.
    def edit(root):
        root.find("gpu").iter(element).__next__().text = value
    record = judge_all(smi("rtx-3080-v13.xml", edit))[check_id]
    assert record["status"] == "ERROR", record["message"]
    assert record["message"].startswith("GPU 0 00000000:0C:00.0 GPU-19d6d965-2acc-f646-00f8-4c76979aabb4: ")
    assert ("unreadable (%r)" % value if value in ("0x10", "2^64", "1.5.3") else "value out of range") in record["message"]


@pytest.mark.parametrize("value", (float("inf"), float("-inf"), float("nan"), 10 ** 5000), ids=("inf", "-inf", "nan", "10**5000"))
@pytest.mark.parametrize("section, key, check_id", [
    ("temperature", "gpu_c", "gpu.temperature"), ("pcie", "replay_counter", "gpu.pcie_replay"),
    ("power", "limit_w", "gpu.power"), ("clocks", "sm_mhz", "gpu.clocks"), ("pcie", "width_current", "gpu.pcie_link")])
def test_non_finite_and_huge_numbers_in_a_record_are_error_value_out_of_range(value, section, key, check_id):
    data = parse_nvidia_smi(read_fixture("nvidia-smi", "rtx-3080-v13.xml"))
    data["gpus"][0][section][key] = value
    record = judge_all(data)[check_id]
    assert record["status"] == "ERROR" and "value out of range" in record["message"] and key in record["message"]
    json.dumps(record, allow_nan=False)


def test_doctor_result_never_holds_nan_or_infinity():
    data = parse_nvidia_smi(read_fixture("nvidia-smi", "rtx-3080-v13.xml"))
    data["gpus"][0]["temperature"]["gpu_c"] = float("nan")
    data["gpus"][0]["memory"]["total_mib"] = float("inf")  # reaches environment.gpus unjudged

    def absent(options):
        raise ProbeAbsent("not on this test host")
    table = dict((name, absent) for name in probe_catalogue.PROBES)
    table["host"] = lambda options: {"hostname": "test-host"}
    table["nvidia_smi"] = lambda options: data
    result = _doctor.run(probes=table)
    text = json.dumps(result, allow_nan=False)
    assert "NaN" not in text and "Infinity" not in text
    assert result["environment"]["gpus"][0]["memory_total_mib"] is None
    assert any("memory_total_mib" in path for path in result["environment"]["non_finite_replaced"])
    (temperature,) = [c for c in result["checks"] if c["id"] == "gpu.temperature"]
    assert temperature["status"] == "ERROR"


def test_finite_result_records_what_it_replaced():
    result = {"checks": [{"id": "x", "details": {"v": [1.0, float("nan")]}}], "environment": {"t": float("-inf")}}
    clean = _doctor.finite_result(result)
    assert clean["checks"][0]["details"] == {"v": [1.0, None], "non_finite_replaced": ["details.v[1]"]}
    assert clean["environment"] == {"t": None, "non_finite_replaced": ["environment.t"]}
    json.dumps(clean, allow_nan=False)


@pytest.mark.parametrize("name", RECORDINGS)
def test_healthy_recordings_have_nothing_unreadable_and_raise_no_fail_or_error(name):
    data = parse_nvidia_smi(read_fixture("nvidia-smi", name))
    assert data["gpus"][0]["unreadable"] == {} and data["unreadable"] == {}
    for cid, record in judge_all(data).items():
        assert record["status"] not in ("FAIL", "ERROR"), (cid, record["message"])


@pytest.mark.parametrize("name", RECORDINGS)
def test_a_gpu_listed_with_every_reading_na_is_error_in_every_value_check_and_never_healthy(name):
    data = smi(name, blank_readings)
    assert data["gpus"][0]["unreadable"] == {}
    for cid, record in judge_all(data).items():
        if cid != "gpu.model":
            assert record["status"] == "ERROR", (name, cid, record["message"])
            assert [g["index"] for g in record["details"]["gpus"]] == [0], cid

    def absent(options):
        raise ProbeAbsent("not on this test host")
    table = dict((probe, absent) for probe in probe_catalogue.PROBES)
    table.update(host=lambda options: {"hostname": "h"}, nvidia_smi=lambda options: data)
    assert _doctor.run(only=["gpu", "driver"], probes=table)["overall_status"] != "healthy"
