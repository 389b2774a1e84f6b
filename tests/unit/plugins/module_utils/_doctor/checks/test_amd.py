"""The GPU checks on AMD records (recorded amd-smi / rocm-smi output), the AMD-only checks, and amdgpu kernel-log grading."""

import json
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import amdgpu_log
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import parse_amd_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.rocm_smi import parse_rocm_smi
from ansible_collections.continuum.hydra.tests.support.amd import (
    MI210_STATIC,
    amd,
    amd_smi_data,
    judge,
    log_envelope,
    metric_text,
    rx6600_metric,
    rx6600_static,
    with_ecc,
)
from ansible_collections.continuum.hydra.tests.support.envelopes import error
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

ROCM_RECORDINGS = sorted(os.listdir(fixture_path("amd", "rocm-smi")))
LOGS = sorted(os.listdir(fixture_path("amd", "kernel-log")))
# The checks AMD and NVIDIA GPUs share, which must judge (not SKIP) a healthy AMD recording.
JUDGED = ("gpu.count", "gpu.model", "gpu.temperature", "gpu.power", "gpu.pcie_link")
SHARED = JUDGED + ("gpu.ecc_errors", "gpu.row_remap", "gpu.pcie_replay", "gpu.clocks", "driver.version",
                   "driver.kernel_module")
AMD_CHECKS = ("driver.amd_smi", "gpu.xgmi", "gpu.partition", "gpu.amdgpu_errors")


def healthy_inventories():
    yield "amd-smi mi210+rx6600", amd_smi_data()
    yield "amd-smi rx6600", amd(parse_amd_smi(json.dumps(rx6600_static()), metric_text()))
    for name in ROCM_RECORDINGS:
        yield name, amd(parse_rocm_smi(read_fixture("amd", "rocm-smi", name)))


@pytest.mark.parametrize("name, data", list(healthy_inventories()))
def test_healthy_recordings_are_judged_with_no_fail_and_no_error(name, data):
    for check_id in SHARED + AMD_CHECKS:
        record = judge(check_id, data)
        assert record["status"] not in ("FAIL", "ERROR"), (name, check_id, record["message"])
        if check_id in JUDGED:
            assert record["status"] in ("PASS", "WARN"), (name, check_id, record["message"])


def test_mi210_values_are_judged_against_the_devices_own_limits():
    data = amd_smi_data()
    assert judge("gpu.temperature", data)["details"]["gpus"][0]["to_slowdown_c"] == 63  # hotspot 37 of 100
    doc = rx6600_metric()
    doc[0]["temperature"]["hotspot"] = {"value": 97, "unit": "C"}
    record = judge("gpu.temperature", amd_smi_data(metric_text(doc)))
    assert record["status"] == "WARN" and "3 C below slowdown" in record["message"]
    doc[0]["temperature"]["hotspot"] = {"value": 100, "unit": "C"}
    assert judge("gpu.temperature", amd_smi_data(metric_text(doc)))["status"] == "FAIL"


def test_an_idle_x8_link_of_an_x16_board_warns_and_fails_under_load():
    assert judge("gpu.pcie_link", amd_smi_data())["status"] == "WARN"
    doc = rx6600_metric()
    doc[0]["usage"]["gfx_activity"] = {"value": 98, "unit": "%"}
    record = judge("gpu.pcie_link", amd_smi_data(metric_text(doc)))
    assert record["status"] == "FAIL" and "x8 of x16 while busy" in record["message"]


def test_planted_uncorrectable_and_deferred_ecc_counts_fail():
    record = judge("gpu.ecc_errors", amd_smi_data(with_ecc(uncorrectable=2, umc_uncorrectable=2)))
    assert record["status"] == "FAIL" and "volatile DRAM 2" in record["message"]
    record = judge("gpu.ecc_errors", amd_smi_data(with_ecc(deferred=1)))
    assert record["status"] == "FAIL" and "deferred 1" in record["message"]
    assert judge("gpu.ecc_errors", amd_smi_data(with_ecc()))["status"] == "PASS"


def test_rocm_smi_has_no_ecc_counts_so_ecc_is_not_judged_never_pass():
    data = amd(parse_rocm_smi(read_fixture("amd", "rocm-smi", "telegraf-mi100_rocm602.json")))
    record = judge("gpu.ecc_errors", data)
    assert record["status"] == "SKIP" and "nothing readable" in record["message"]


def test_unreadable_amd_values_are_error_naming_the_field():
    doc = rx6600_metric()
    doc[0]["power"]["socket_power"] = "AMDSMI_STATUS_NO_PERM"
    record = judge("gpu.power", amd_smi_data(metric_text(doc)))
    assert record["status"] == "ERROR" and "power.draw_w" in record["message"]


def test_count_from_pci_a_device_absent_from_amd_smi_fails():
    listing = json.dumps([{"gpu": 0, "bdf": "0000:83:00.0", "uuid": "u0"}])
    inventory = parse_amd_smi(MI210_STATIC, metric_text(), listing)
    pci = [{"address": "0000:83:00.0", "class": "0x038000", "driver": "amdgpu"},
           {"address": "0000:c3:00.0", "class": "0x120000", "driver": None}]
    record = judge("gpu.count", amd(inventory, pci))
    assert record["status"] == "FAIL" and "0000:c3:00.0" in record["message"]
    record = judge("gpu.count", amd(inventory, pci[:1]), {"gpu_count": 1})
    assert record["status"] == "PASS" and "as expected" in record["message"]
    record = judge("gpu.count", amd(inventory, pci[:1]), {"gpu_count": 8})
    assert record["status"] == "FAIL" and "1 AMD GPUs where 8 are expected" in record["message"]


def test_partitions_multiply_logical_devices_and_the_count_is_physical():
    static = json.loads(MI210_STATIC)
    static["gpu_data"][0]["partition"] = {"compute_partition": "CPX", "memory_partition": "NPS4"}
    gpus = [dict(static["gpu_data"][0], gpu=index) for index in range(8)]
    listing = json.dumps([{"gpu": index, "bdf": "0000:05:00.%d" % index, "partition_id": index} for index in range(8)])
    metric = [dict(rx6600_metric()[0], gpu=index) for index in range(8)]
    inventory = parse_amd_smi(json.dumps({"gpu_data": gpus}), metric_text(metric), listing)
    data = amd(inventory, [{"address": "0000:05:00.0", "class": "0x120000", "driver": "amdgpu"}],
               kfd={"gpu_nodes": 8, "nodes": []})
    record = judge("gpu.count", data, {"gpu_count": 1})
    assert record["status"] == "PASS" and "8 logical devices, partition CPX" in record["message"]
    assert judge("gpu.partition", data, {"amd_compute_partition": "CPX"})["status"] == "PASS"
    record = judge("gpu.partition", data, {"amd_compute_partition": "spx", "amd_memory_partition": "NPS1"})
    assert record["status"] == "FAIL" and "compute CPX (expected SPX)" in record["message"]
    assert judge("gpu.partition", data, {"amd_compute_partition": "XPX"})["status"] == "ERROR"
    # Fewer KFD nodes than listed GPUs: ROCm cannot use them all.
    assert judge("gpu.count", dict(data, kfd={"gpu_nodes": 6, "nodes": []}))["status"] == "WARN"


def test_partition_na_is_skip_never_fail():
    assert judge("gpu.partition", amd_smi_data(), {"amd_compute_partition": "SPX"})["status"] == "SKIP"


def test_xgmi_errors_fail_and_na_skips():
    assert judge("gpu.xgmi", amd_smi_data())["status"] == "SKIP"
    doc = rx6600_metric()
    doc[0]["xgmi_err"] = 3
    assert judge("gpu.xgmi", amd_smi_data(metric_text(doc)))["status"] == "FAIL"
    doc[0]["xgmi_err"] = 0
    assert judge("gpu.xgmi", amd_smi_data(metric_text(doc)))["status"] == "PASS"


def test_bad_pages_pending_warn_unreservable_and_threshold_fail():
    data = amd_smi_data()
    gpu = data["gpus"][0]
    for pages, status in (({"retired": 3, "pending": 0, "unreservable": 0}, "PASS"),
                          ({"retired": 3, "pending": 1, "unreservable": 0}, "WARN"),
                          ({"retired": 600, "pending": 0, "unreservable": 0}, "WARN"),
                          ({"retired": 655, "pending": 0, "unreservable": 0}, "FAIL"),
                          ({"retired": 3, "pending": 0, "unreservable": 1}, "FAIL")):
        gpu["bad_pages"] = dict(pages, threshold=655)
        assert judge("gpu.row_remap", data)["status"] == status, pages


def test_replays_are_judged_by_growth_not_by_their_absolute_count():
    data = amd(parse_rocm_smi(read_fixture("amd", "rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json")))
    gpu = data["gpus"][0]
    assert gpu["pcie"]["replay_counter"] == 3824
    gpu["pcie"]["replay_growth"] = 0
    assert judge("gpu.pcie_replay", data)["status"] == "PASS"
    gpu["pcie"]["replay_growth"] = 12
    record = judge("gpu.pcie_replay", data)
    assert record["status"] == "WARN" and "12 PCIe replays while doctor ran" in record["message"]


def test_driver_version_in_box_and_dkms():
    assert judge("driver.version", amd_smi_data())["status"] == "SKIP"
    record = judge("driver.version", amd_smi_data(), {"driver_min": "6.10"})
    assert record["status"] == "WARN" and "in-box" in record["message"]
    data = amd(parse_rocm_smi(read_fixture("amd", "rocm-smi", "telegraf-rx6700xt_rocm612.json")))
    assert judge("driver.version", data, {"driver_min": "6.3.6"})["status"] == "PASS"
    assert judge("driver.version", data, {"driver_min": "6.10.5"})["status"] == "FAIL"


def test_kernel_module_on_an_amd_host():
    data = amd(parse_rocm_smi(read_fixture("amd", "rocm-smi", "telegraf-rx6700xt_rocm612.json")),
               module={"loaded": True, "version": "6.3.6", "kind": "dkms"})
    assert judge("driver.kernel_module", data)["status"] == "PASS"
    data["kernel_module"]["version"] = "6.2.4"
    assert judge("driver.kernel_module", data)["status"] == "FAIL"


def test_a_failing_amd_smi_is_one_error_and_the_rest_are_blocked():
    records = dict((cid, judge(cid, amd_smi=error("amd-smi static --json exited with rc 1: boom")))
                   for cid in SHARED + AMD_CHECKS)
    records = dict((r["id"], r) for r in registry.blocked(list(records.values())))
    assert records["driver.amd_smi"]["status"] == "ERROR"
    for check_id in ("gpu.temperature", "gpu.power", "gpu.pcie_link", "gpu.count", "gpu.model", "gpu.xgmi"):
        assert records[check_id]["status"] == "SKIP" and records[check_id]["blocked_by"] == "driver.amd_smi", check_id


def test_amd_gpus_on_the_bus_without_any_tool_fail():
    data = amd({"vendor": "amd", "source": None, "driver_version": None, "driver_kind": None, "kernel_release": None,
                "gpus": [], "unreadable": {}, "problems": ["no tool"]},
               [{"address": "0000:c3:00.0", "class": "0x120000", "driver": None}])
    assert judge("driver.amd_smi", data)["status"] == "FAIL"
    assert judge("gpu.count", data)["status"] == "FAIL"


def test_a_host_with_neither_vendor_skips():
    for check_id in SHARED + AMD_CHECKS:
        assert judge(check_id)["status"] in ("SKIP", "PASS"), check_id


# ---------------------------------------------------------------- kernel log


@pytest.mark.parametrize("name, status, kinds", [
    ("rocm-1886-dmesg-ctime-mi50-athub-ue-reset-smu-fail.log", "FAIL", {"ras_uncorrectable", "reset_failed"}),
    ("rocm-install-615-mi210-fatal-init.log", "FAIL", {"init_failed"}),
    ("cosmic-epoch-3764-rx5700xt-ring-timeout-baco-reset-ok.log", "WARN", {"ring_timeout", "reset_succeeded", "vram_lost"}),
    ("cosmic-comp-2626-journal-ring-timeout-reset-ok.log", "WARN", {"ring_timeout", "reset_succeeded", "vram_lost"}),
    ("tomsom-38-sdma-timeout-mode2-reset-ok-ras-ta-absent.log", "WARN", {"ring_timeout", "reset_succeeded"}),
    ("sway-8458-rx7900xtx-ring-timeout-reset-begin.log", "WARN", {"ring_timeout", "reset_unfinished"}),
    ("rocm-amdgpu-172-nonretry-page-fault-pt-main-thread.log", "PASS", {"page_fault"}),
    ("rocm-amdgpu-150-mmhub-page-fault-ipython3.log", "PASS", {"page_fault"}),
])
def test_recorded_kernel_logs_are_graded(name, status, kinds):
    log = log_envelope(read_fixture("amd", "kernel-log", name))
    record = judge("gpu.amdgpu_errors", amd_smi_data(), amdgpu_log=log)
    assert record["status"] == status, record["message"]
    assert set(e["kind"] for e in record["details"]["gpus"]) == kinds
    assert len(LOGS) >= 8


def test_a_failed_reset_names_the_gpu_and_asks_for_a_power_cycle():
    log = log_envelope(read_fixture("amd", "kernel-log", "rocm-1886-dmesg-ctime-mi50-athub-ue-reset-smu-fail.log"))
    record = judge("gpu.amdgpu_errors", amd_smi_data(), amdgpu_log=log)
    assert "0000:e3:00" in record["message"] and "power-cycle" in record["remediation"]


def test_page_faults_list_their_processes():
    log = log_envelope(read_fixture("amd", "kernel-log", "rocm-amdgpu-150-mmhub-page-fault-ipython3.log"))
    record = judge("gpu.amdgpu_errors", amd_smi_data(), amdgpu_log=log)
    assert "ipython3 (pid 846049)" in record["message"]


@pytest.mark.parametrize("line, kind", [
    # The forms amdgpu prints (amdgpu_ras.c, amdgpu_ras_eeprom.c, amdgpu_aca.c; docs/amd.md); counts and STATUS
    # values planted (UC bit 61 set in the first ACA record, clear in the second).
    ("amdgpu 0000:c1:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block", "ras_uncorrectable"),
    ("amdgpu 0000:c1:00.0: amdgpu: 5 correctable hardware errors detected in total in gfx block", "ras_correctable"),
    ("amdgpu 0000:c1:00.0: amdgpu: RAS records:700 exceed threshold:655", "bad_page_threshold"),
    ("amdgpu 0000:c1:00.0: amdgpu: Saved bad pages(655) reaches threshold value(655)", "bad_page_threshold"),
    ("amdgpu 0000:c1:00.0: amdgpu: {1}[Hardware Error]: aca entry[00].STATUS=0xbaa0000000040135", "ras_uncorrectable"),
    ("amdgpu 0000:c1:00.0: amdgpu: {2}[Hardware Error]: aca entry[00].STATUS=0x9c20000000040135", "ras_correctable"),
    ("amdgpu 0000:c1:00.0: amdgpu: GPU reset(3) failed", "reset_failed"),
])
def test_line_forms(line, kind):
    assert [c["kind"] for c in amdgpu_log.scan(line)["counts"]] == [kind]


@pytest.mark.parametrize("line", [
    "amdgpu 0000:33:00.0: amdgpu: RAS: optional ras ta ucode is not available",
    "amdgpu 0000:c1:00.0: amdgpu: MEM ECC is active.",
    "amdgpu 0000:c1:00.0: amdgpu: SRAM ECC is active.",
    "amdgpu 0000:c1:00.0: amdgpu: 0 uncorrectable hardware errors detected in umc block",
    "amdgpu 0000:c1:00.0: amdgpu: RAS INFO: ras initialized successfully, hardware ability[7fff] ras_mask[7fff]",
    "amdgpu 0000:c1:00.0: amdgpu: GECC is disabled, set amdgpu_ras_enable=1 to enable GECC in next boot cycle if needed",
    "amdgpu 0000:28:00.0: Ring gfx_0.0.0 reset failed",
])
def test_healthy_and_harmless_lines_do_not_alarm(line):
    assert amdgpu_log.scan(line)["counts"] == []


def _athub_log_with(bad_line):
    """The real MI50 log (ATHUB uncorrectable error, failed reset) with one malformed amdgpu line planted first."""
    return bad_line + "\n" + read_fixture("amd", "kernel-log", "rocm-1886-dmesg-ctime-mi50-athub-ue-reset-smu-fail.log")


UE_LINE = read_fixture("amd", "kernel-log", "rocm-1886-dmesg-ctime-mi50-athub-ue-reset-smu-fail.log").splitlines()[2]


@pytest.mark.parametrize("bad_line", [
    "2023-13-07T14:25:56,000000+00:00 " + UE_LINE.split("] ", 1)[1],  # month 13
    "2023-01-07T14:25:56,000000+99:00 " + UE_LINE.split("] ", 1)[1],  # UTC offset +99:00
    "amdgpu 0000:e3:00.0: amdgpu: %s uncorrectable hardware errors detected in umc block" % ("9" * 5000),
])
def test_one_malformed_amdgpu_line_is_counted_and_the_uncorrectable_error_beside_it_still_fails(bad_line):
    record = judge("gpu.amdgpu_errors", amd_smi_data(), amdgpu_log=log_envelope(_athub_log_with(bad_line)))
    assert record["status"] == "FAIL" and "uncorrectable RAS error x1 on GPU at 0000:e3:00" in record["message"]
    assert record["details"]["bad_lines"]["amdgpu_log"]["count"] == 1
    assert "1 unreadable line skipped (line 1: " in record["message"]


def test_a_log_whose_only_amdgpu_event_line_is_unreadable_warns_never_passes():
    bad = "2023-13-07T14:25:56,000000+00:00 " + UE_LINE.split("] ", 1)[1]
    record = judge("gpu.amdgpu_errors", amd_smi_data(), amdgpu_log=log_envelope(bad))
    assert record["status"] == "WARN" and "1 unreadable line skipped" in record["message"]
    assert record["remediation"] == registry.BAD_LINES_ADVICE


# amd-smi: reported errors are never SKIP (issue 23).

def test_an_uncorrectable_count_with_the_ras_state_na_fails_naming_the_contradiction():
    # The RX 6600 pair reads ecc_block_state "N/A"; a planted uncorrectable (or deferred) count used to be dropped.
    for planted, words in ((with_ecc(uncorrectable=3), "volatile total 3"), (with_ecc(deferred=1), "volatile deferred 1")):
        record = judge("gpu.ecc_errors", amd(parse_amd_smi(json.dumps(rx6600_static()), planted)))
        assert record["status"] == "FAIL" and words in record["message"], record["message"]
        assert "although amd-smi static reads the RAS block state as N/A (state unknown)" in record["message"]
    assert judge("gpu.ecc_errors", amd(parse_amd_smi(json.dumps(rx6600_static()), with_ecc())))["status"] == "SKIP"


def test_a_metric_matched_to_no_gpu_makes_ecc_an_error_never_a_pass():
    static = json.loads(MI210_STATIC)
    static["gpu_data"].append(dict(static["gpu_data"][0], gpu=1))
    metric = json.loads(with_ecc(uncorrectable=3))
    clean = json.loads(with_ecc())
    inventory = parse_amd_smi(json.dumps(static), metric_text([dict(clean[0], gpu=1), dict(metric[0], gpu=2)]))
    record = judge("gpu.ecc_errors", amd(inventory))
    assert record["status"] == "ERROR" and "ecc.volatile unreadable ('not in amd-smi metric" in record["message"]
    assert "3 uncorrectable ECC errors" in " ".join(judge("driver.amd_smi", amd(inventory))["details"]["problems"])


def test_a_gpu_whose_index_is_unknown_is_named_by_its_address_never_gpu_none():
    # A record with an address but no index (amd-smi's "gpu" field missing), then one with neither: the message names
    # each by what is known (_results.gpu_name); it printed "GPU None (0000:0b:00.0)" and "GPU None (None)".
    doc = rx6600_metric()
    doc[0]["xgmi_err"] = 3
    data = amd_smi_data(metric_text(doc))
    gpu = next(g for g in data["gpus"] if (g.get("xgmi") or {}).get("error_count"))
    gpu.update(index=None, pci_bus_id="0000:0b:00.0")
    record = judge("gpu.xgmi", data)
    assert record["status"] == "FAIL" and record["message"] == "GPU at 0000:0b:00.0: XGMI error count 3"
    gpu.update(pci_bus_id=None)
    assert judge("gpu.xgmi", data)["message"] == "GPU (not named): XGMI error count 3"
