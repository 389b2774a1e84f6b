"""The GPU and driver checks on recorded nvidia-smi output, with faults planted by editing copies of the recordings."""

import copy
import os
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import gpu as gpu_checks
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi, parse_nvlink_status
from ansible_collections.continuum.hydra.tests.support.envelopes import absent, error, ok
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

RECORDINGS = ("a100-sxm4-v12.xml", "a10g.xml", "quadro-p2000-v12.xml", "rtx-3060-v12.xml", "rtx-3080-v13.xml",
              "rtx-4000-sff-ada-v13.xml", "tesla-t4.xml")
GPU_CHECKS = [c for c in CATALOGUE if c.func.__module__ == gpu_checks.__name__]
A100_UUID = "GPU-513536b6-7d19-9063-b049-1e69664bb298"
T4_UUID = "GPU-d37e67a5-91dd-3774-a5cb-99096249601a"


# ---------------------------------------------------------------- planting faults in copies of recordings


def smi(name, *edits):
    """The parsed recording after edits: (path, text) pairs, or callables taking the XML root."""
    root = ET.fromstring(read_fixture("nvidia-smi", name))
    for edit in edits:
        if callable(edit):
            edit(root)
        else:
            path, text = edit
            node = root.find("gpu/" + path)
            assert node is not None, path
            node.text = text
    return parse_nvidia_smi(ET.tostring(root, encoding="unicode"))


def gpus(count):
    """An edit turning the recording into a host with count GPUs: copies of its <gpu>, own bus id and UUID each."""
    def multiply(root):
        original = root.find("gpu")
        for index in range(1, count):
            clone = copy.deepcopy(original)
            bus_id = "00000000:%02X:00.0" % (0x10 + index)
            clone.set("id", bus_id)
            clone.find("pci/pci_bus_id").text = bus_id
            clone.find("uuid").text = original.find("uuid").text[:-4] + "%04d" % index
            root.append(clone)
        root.find("attached_gpus").text = str(count)
    return multiply


def kernel_log(text="", hours=24):
    """What the kernel_log probe returns for a log text, built by the probe's own scan()."""
    return ok(dict(xid.scan(text), source="journalctl", journal_problem=None, window_hours=hours, window_applied=True))


def defaults():
    """What the other probes say on a plain host with one GPU and no NVLink/NVSwitch."""
    return {
        "nvidia_smi": absent("nvidia-smi not found on PATH (no NVIDIA driver installed?)"),
        "nvml": ok({"available": False, "error": "NVMLError_LibraryNotFound: NVML Shared Library Not Found",
                    "driver_version": None, "device_count": None, "devices": []}),
        "nvidia_pci": ok({"gpus": [], "nvswitches": []}),
        "kernel_module": absent("the nvidia kernel module is not loaded"),
        "kernel_log": kernel_log(),
        "nvlink": absent("no GPU on this host has NVLink"),
        "fabric_manager": absent("no NVSwitch on this host: Fabric Manager is not needed"),
        "host": ok({"is_container": False, "is_vm": False, "is_wsl": False}),
        "amd_smi": absent("no AMD GPU: amd-smi and rocm-smi not on PATH and no AMD GPU on the PCI bus"),
    }


def judge(check_id, data=None, expect=None, **envelopes):
    """Run one registered check the way doctor does (gating included) on the given probe data."""
    (chk,) = [c for c in CATALOGUE if c.id == check_id]
    probes = defaults()
    if data is not None:
        probes["nvidia_smi"] = ok(data)
    probes.update(envelopes)
    return registry.evaluate(chk, probes, expect or {})


def named(record):
    return [(g["index"], g["uuid"]) for g in record["details"]["gpus"]]


# ---------------------------------------------------------------- healthy recordings


@pytest.mark.parametrize("name", RECORDINGS)
def test_healthy_idle_recordings_give_no_fail_and_no_error(name):
    data = smi(name)
    for chk in GPU_CHECKS:
        record = judge(chk.id, data)
        assert record["status"] not in ("FAIL", "ERROR"), (chk.id, record["message"])
        assert record["message"] and "\n" not in record["message"]
        if record["status"] in ("WARN", "FAIL", "ERROR"):
            assert record["remediation"], chk.id


def test_healthy_recordings_warn_only_where_the_hardware_says_so():
    warned = dict((name, set(c.id for c in GPU_CHECKS if judge(c.id, smi(name))["status"] == "WARN"))
                  for name in RECORDINGS)
    nvml = "gpu.nvml_available"  # nvidia-smi works but NVML does not initialise in these envelopes
    assert warned == {
        "a100-sxm4-v12.xml": {"gpu.persistence_mode", nvml},
        "a10g.xml": {"gpu.pcie_link", "gpu.persistence_mode", nvml},
        "quadro-p2000-v12.xml": {"gpu.pcie_link", nvml},
        "rtx-3060-v12.xml": {nvml},
        "rtx-3080-v13.xml": {"gpu.persistence_mode", nvml},
        "rtx-4000-sff-ada-v13.xml": {nvml},
        "tesla-t4.xml": {"gpu.pcie_link", "gpu.persistence_mode", nvml},
    }


def test_every_gpu_check_documents_its_rule_and_remediation():
    for chk in GPU_CHECKS:
        assert chk.rule.startswith("Reads "), chk.id
        assert "Remediation:" in chk.rule, chk.id


# ---------------------------------------------------------------- planted faults


def test_uncorrectable_ecc_fails_naming_the_gpu():
    record = judge("gpu.ecc_errors", smi("a100-sxm4-v12.xml", ("ecc_errors/volatile/dram_uncorrectable", "2")))
    assert record["status"] == "FAIL"
    assert named(record) == [(0, A100_UUID)]
    assert "volatile DRAM 2" in record["message"] and record["remediation"]


def test_a_lifetime_only_uncorrectable_count_warns_and_does_not_drain_forever():
    # aggregate counts survive reboots: failing on them would keep a repaired GPU failed for ever.
    aggregate_sram = judge("gpu.ecc_errors", smi("tesla-t4.xml", ("ecc_errors/aggregate/sram_uncorrectable", "1")))
    assert aggregate_sram["status"] == "WARN" and "lifetime count only (aggregate SRAM 1)" in aggregate_sram["message"]
    assert "nvidia-smi -p 1" in aggregate_sram["remediation"]
    both = judge("gpu.ecc_errors", smi("tesla-t4.xml", ("ecc_errors/aggregate/sram_uncorrectable", "1"),
                                       ("ecc_errors/volatile/sram_uncorrectable", "1")))
    assert both["status"] == "FAIL" and "volatile SRAM 1" in both["message"]


def test_correctable_ecc_over_the_threshold_warns():
    data = smi("tesla-t4.xml", ("ecc_errors/volatile/dram_correctable", "150"))
    assert judge("gpu.ecc_errors", data)["status"] == "WARN"
    assert judge("gpu.ecc_errors", data, {"ecc_correctable_warn": 200})["status"] == "PASS"


def test_pending_row_remap_warns_reset_needed_and_failure_fails():
    pending = judge("gpu.row_remap", smi("a10g.xml", ("remapped_rows/remapped_row_pending", "Yes")))
    assert pending["status"] == "WARN" and "reset needed" in pending["message"]
    assert named(pending) == [(0, "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94")]
    failed = judge("gpu.row_remap", smi("a10g.xml", ("remapped_rows/remapped_row_failure", "Yes")))
    assert failed["status"] == "FAIL"
    many = judge("gpu.row_remap", smi("a10g.xml", ("remapped_rows/remapped_row_unc", "600")))
    assert many["status"] == "WARN" and "600 rows remapped" in many["message"]
    exhausted = judge("gpu.row_remap", smi("rtx-4000-sff-ada-v13.xml",
                                           ("remapped_rows/row_remapper_histogram/row_remapper_histogram_none", "2 bank(s)")))
    assert exhausted["status"] == "WARN" and "no spare row" in exhausted["message"]


def test_pre_ampere_retired_pages():
    pending = judge("gpu.row_remap", smi("tesla-t4.xml", ("retired_pages/pending_retirement", "Yes")))
    assert pending["status"] == "WARN" and "retirement pending" in pending["message"]
    dbe = judge("gpu.row_remap", smi("tesla-t4.xml", ("retired_pages/double_bit_retirement/retired_count", "15")))
    assert dbe["status"] == "FAIL" and "15 for double-bit" in dbe["message"]
    assert judge("gpu.row_remap", smi("tesla-t4.xml", ("retired_pages/double_bit_retirement/retired_count", "15")),
                 {"retired_pages_dbe_fail": 20})["status"] == "PASS"
    assert judge("gpu.row_remap", smi("a100-sxm4-v12.xml"))["message"].endswith("(not reported while MIG is enabled)")


def test_x8_of_x16_fails_on_a_busy_gpu_and_warns_at_idle():
    idle = judge("gpu.pcie_link", smi("tesla-t4.xml"))
    assert idle["status"] == "WARN" and "x8 of x16 at idle: re-check under load" in idle["message"]
    busy = judge("gpu.pcie_link", smi("tesla-t4.xml", ("utilization/gpu_util", "85 %")))
    assert busy["status"] == "FAIL" and "x8 of x16 while busy (85 %)" in busy["message"]
    assert named(busy) == [(0, T4_UUID)]
    assert judge("gpu.pcie_link", smi("tesla-t4.xml", ("utilization/gpu_util", "85 %")), {"pcie_width": 8})["status"] == "PASS"


def test_a_lowered_generation_is_judged_only_under_load():
    assert judge("gpu.pcie_link", smi("rtx-4000-sff-ada-v13.xml"))["status"] == "PASS"  # gen 1 of 4 at idle
    busy = judge("gpu.pcie_link", smi("rtx-4000-sff-ada-v13.xml", ("utilization/gpu_util", "50 %")))
    assert busy["status"] == "FAIL" and "gen 1 of 4" in busy["message"]
    assert judge("gpu.pcie_link", smi("rtx-4000-sff-ada-v13.xml", ("utilization/gpu_util", "5 %")),
                 {"gpu_busy_util_pct": 1})["status"] == "FAIL"


def test_persistence_off_warns_unless_intended():
    record = judge("gpu.persistence_mode", smi("a100-sxm4-v12.xml"))
    assert record["status"] == "WARN" and "nvidia-persistenced" in record["remediation"]
    assert named(record) == [(0, A100_UUID)]
    assert judge("gpu.persistence_mode", smi("a100-sxm4-v12.xml"), {"persistence_mode": "disabled"})["status"] == "PASS"
    assert judge("gpu.persistence_mode", smi("rtx-3060-v12.xml"))["status"] == "PASS"
    bad = judge("gpu.persistence_mode", smi("a100-sxm4-v12.xml"), {"persistence_mode": "off"})
    assert bad["status"] == "ERROR" and "'off' is not one of: enabled, disabled" in bad["message"]


def plant(log_name, *lines):
    """A copy of a recorded kernel log with lines added at the end."""
    return read_fixture("kernel-log", log_name).rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def test_xid_79_naming_a_gpus_address_fails_on_that_gpu_and_repeats_are_counted_once():
    line = "2026-11-22T13:20:%02d,000000+00:00 NVRM: Xid (PCI:0000:01:00): 79, pid=1234, GPU has fallen off the bus."
    log = kernel_log(plant("dmesg-iso-kvm-guest.txt", *(line % s for s in range(3))))
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml", gpus(2)), kernel_log=log)
    assert record["status"] == "FAIL"
    assert record["message"].startswith("XID 79 (GPU has fallen off the bus) x3 on GPU 0 (00000000:01:00.0)")
    (entry,) = record["details"]["gpus"]
    assert (entry["index"], entry["uuid"], entry["count"], entry["severity"]) == (0, A100_UUID, 3, "critical")
    assert entry["nvidia_action"] == "RESTART_BM" and "power-cycle" in record["remediation"]
    assert (entry["first_seen"], entry["last_seen"]) == ("2026-11-22T13:20:00+00:00", "2026-11-22T13:20:02+00:00")


# The real Xid 79 line of nvrm-xid-lines.txt, and copies of real NVRM lines with one field made impossible (issue 23).
REAL_79 = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()[1].split("kernel: ", 1)[1]
REAL_13 = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()[-1].split("] ", 1)[1]
MALFORMED = ("2026-13-22T13:20:00,000000+00:00 " + REAL_13, "2026-11-22T13:20:00,000000+99:00 " + REAL_13,
             "2026-11-22T13:20:00,000000+00:00 " + REAL_13.replace("13,", "9" * 5000 + ",", 1))


@pytest.mark.parametrize("bad_line", MALFORMED)
def test_a_malformed_nvrm_line_beside_a_real_xid_79_leaves_the_xid_79_a_fail(bad_line):
    log = kernel_log(plant("dmesg-iso-kvm-guest.txt", bad_line, "2026-11-22T13:20:01,000000+00:00 " + REAL_79))
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=log)
    assert record["status"] == "FAIL" and record["message"].startswith("XID 79 (GPU has fallen off the bus) x1 on GPU at 0000:2b:00")
    assert record["details"]["bad_lines"]["kernel_log"]["count"] == 1
    assert "1 unreadable line skipped (line 23: " in record["message"]


def test_a_log_whose_only_nvrm_line_is_unreadable_warns_never_passes():
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log(MALFORMED[0]))
    assert record["status"] == "WARN" and record["message"].startswith("no XID in the kernel log")
    assert "1 unreadable line skipped (line 1: month must be in 1..12) in kernel_log" in record["message"]


def test_xid_on_a_gpu_nvidia_smi_no_longer_lists_is_named_by_address_and_logged_uuid():
    text = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()[:2]  # GPU at 2b:00 + its XID 79
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log("\n".join(text)))
    assert record["status"] == "FAIL" and "on GPU at 0000:2b:00" in record["message"]
    (entry,) = record["details"]["gpus"]
    assert (entry["index"], entry["uuid"]) == (None, "GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae")


def test_every_real_xid_line_is_graded_from_the_catalogue():
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"),
                   kernel_log=kernel_log(read_fixture("kernel-log", "nvrm-xid-lines.txt")))
    grades = dict(((e["pci_bus_id"], e["xid"]), e["severity"]) for e in record["details"]["gpus"])
    assert grades == {
        ("0000:2b:00", 79): "critical", ("0000:10:1c", 63): "warning", ("00000000:01:00.0", 94): "warning",
        ("00000000:01:00.0", 95): "critical", ("0000:19:00", 119): "critical", ("0000:05:00", 79): "critical",
        ("00000000:01:00.0", 31): "info", ("00000000:01:00.0", 13): "info",
    }
    assert record["status"] == "FAIL" and "(and 1 more)" in record["message"]


def test_application_xids_pass_with_a_listing_and_warning_xids_warn():
    app = "2026-11-22T13:20:00+0000 h kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=77, Graphics Exception"
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log(app + "\n" + app))
    assert record["status"] == "PASS" and "2 application-level XID(s) listed: 13 x2" in record["message"]
    remap = "2026-11-22T13:20:00+0000 h kernel: NVRM: Xid (PCI:0000:01:00): 63, pid=1896, Row Remapper: New row"
    assert judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log(remap))["status"] == "WARN"
    unknown = "NVRM: Xid (PCI:0000:01:00): 999, something new"
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log(unknown))
    assert record["status"] == "WARN" and "not in NVIDIA's XID catalogue" in record["message"]


def test_xid_check_skips_on_a_host_without_driver_or_xid_and_errors_when_the_log_is_unreadable():
    assert judge("gpu.xid_errors")["status"] == "SKIP"
    assert judge("gpu.xid_errors", smi("tesla-t4.xml"))["status"] == "PASS"
    record = judge("gpu.xid_errors", smi("tesla-t4.xml"), kernel_log=error("dmesg: read kernel buffer failed: "
                                                                           "Operation not permitted; ..."))
    assert record["status"] == "ERROR" and "Operation not permitted" in record["message"]


def test_seven_gpus_where_eight_are_expected_fails_naming_the_missing_count_and_address():
    seven = smi("a100-sxm4-v12.xml", gpus(7))
    assert len(seven["gpus"]) == 7
    on_bus = [{"address": "0000:01:00.0", "device_id": "0x20b2", "class": "0x030200", "driver": "nvidia"}] + [
        {"address": "0000:%02x:00.0" % (0x10 + i), "device_id": "0x20b2", "class": "0x030200", "driver": "nvidia"}
        for i in range(1, 8)]
    record = judge("gpu.count", seven, {"gpu_count": 8}, nvidia_pci=ok({"gpus": on_bus, "nvswitches": []}))
    assert record["status"] == "FAIL" and record["details"]["attached_gpus"] == 7
    assert record["message"] == ("7 GPUs where 8 are expected: 1 missing; on the PCI bus but not seen by the "
                                 "driver: 0000:17:00.0")
    assert judge("gpu.count", smi("a100-sxm4-v12.xml", gpus(8)), {"gpu_count": 8})["status"] == "PASS"
    assert judge("gpu.count", smi("a100-sxm4-v12.xml", gpus(9)), {"gpu_count": 8})["status"] == "FAIL"
    assert judge("gpu.count", seven)["status"] == "PASS"  # informational without an expectation


def test_a_gpu_on_the_pci_bus_the_driver_does_not_see_fails_gpu_count_without_an_expectation():
    # only: [gpu] leaves runtime.gpu_passthrough out: gpu.count must not PASS a host that lost a GPU.
    one = smi("a100-sxm4-v12.xml")
    on_bus = [{"address": "0000:01:00.0", "device_id": "0x20b2", "class": "0x030200", "driver": "nvidia"},
              {"address": "0000:c1:00.0", "device_id": "0x20b2", "class": "0x030200", "driver": None}]
    record = judge("gpu.count", one, nvidia_pci=ok({"gpus": on_bus, "nvswitches": []}))
    assert record["status"] == "FAIL" and "0000:c1:00.0" in record["message"], record["message"]
    handed_to_vm = [on_bus[0], dict(on_bus[1], driver="vfio-pci")]
    assert judge("gpu.count", one, nvidia_pci=ok({"gpus": handed_to_vm, "nvswitches": []}))["status"] == "PASS"
    in_container = judge("gpu.count", one, nvidia_pci=ok({"gpus": on_bus, "nvswitches": []}),
                         host=ok({"is_container": True, "is_vm": False, "is_wsl": False}))
    assert in_container["status"] == "PASS"


def test_gpu_count_and_model_with_an_expectation_fail_when_nvidia_smi_is_absent():
    count = judge("gpu.count", None, {"gpu_count": 8})
    assert count["status"] == "FAIL" and count["message"].startswith("0 of 8 expected GPUs visible")
    model = judge("gpu.model", None, {"gpu_model": "H100"})
    assert model["status"] == "FAIL"
    assert judge("gpu.count")["status"] == "SKIP" and judge("gpu.model")["status"] == "SKIP"
    assert judge("gpu.count", None, {"gpu_count": 8}, nvidia_smi=error("nvidia-smi -q -x timed out after 30s"))["status"] == "ERROR"


def test_gpu_model_names_the_wrong_gpus():
    def second_is_a40(root):
        gpus(2)(root)
        root.findall("gpu")[1].find("product_name").text = "NVIDIA A40"
    record = judge("gpu.model", smi("a100-sxm4-v12.xml", second_is_a40), {"gpu_model": "a100-sxm4"})
    assert record["status"] == "FAIL" and "1 of 2 GPUs are not a100-sxm4" in record["message"]
    assert named(record) == [(1, A100_UUID[:-4] + "0001")]
    assert judge("gpu.model", smi("a100-sxm4-v12.xml"), {"gpu_model": "A100"})["status"] == "PASS"


def test_thermal_throttle_warns_power_brake_and_hw_slowdown_fail():
    reason = "clocks_event_reasons/clocks_event_reason_%s"
    thermal = judge("gpu.clock_throttle_reasons", smi("a100-sxm4-v12.xml", (reason % "hw_thermal_slowdown", "Active")))
    assert thermal["status"] == "WARN" and "hw_thermal_slowdown" in thermal["message"]
    assert named(thermal) == [(0, A100_UUID)]
    brake = judge("gpu.clock_throttle_reasons", smi("a100-sxm4-v12.xml", (reason % "hw_power_brake_slowdown", "Active")))
    assert brake["status"] == "FAIL"
    assert judge("gpu.clock_throttle_reasons", smi("a100-sxm4-v12.xml", (reason % "hw_slowdown", "Active")))["status"] == "FAIL"
    assert judge("gpu.clock_throttle_reasons", smi("a100-sxm4-v12.xml", (reason % "hw_slowdown", "Active"),
                                                   (reason % "hw_thermal_slowdown", "Active")))["status"] == "WARN"
    older = "clocks_throttle_reasons/clocks_throttle_reason_sw_thermal_slowdown"
    assert judge("gpu.clock_throttle_reasons", smi("tesla-t4.xml", (older, "Active")))["status"] == "WARN"
    assert judge("gpu.clock_throttle_reasons", smi("tesla-t4.xml", (reason.replace("event", "throttle") % "sw_power_cap",
                                                                    "Active")))["status"] == "PASS"


def test_kernel_module_version_mismatch_fails():
    module = ok({"version": "535.104.05", "source": "/proc/driver/nvidia/version", "open_module": False})
    record = judge("driver.kernel_module", smi("a100-sxm4-v12.xml"), kernel_module=module)
    assert record["status"] == "FAIL" and "kernel module 535.104.05 but user-space driver 535.54.03" in record["message"]
    assert "Reboot" in record["remediation"]
    same = ok({"version": "535.54.03", "source": "/proc/driver/nvidia/version", "open_module": False})
    assert judge("driver.kernel_module", smi("a100-sxm4-v12.xml"), kernel_module=same)["status"] == "PASS"
    broken = judge("driver.kernel_module", kernel_module=module, nvidia_smi=error(
        "nvidia-smi -q -x exited with rc 18: Failed to initialize NVML: Driver/library version mismatch"))
    assert broken["status"] == "FAIL" and "version mismatch" in broken["message"]
    assert judge("driver.kernel_module", smi("a100-sxm4-v12.xml"))["status"] == "SKIP"


@pytest.mark.parametrize("expect, status, fragment", [
    ({"driver_min": "535.104.05"}, "FAIL", "driver 535.54.03 is older than driver_min 535.104.05"),
    ({"driver_max": "530"}, "FAIL", "driver 535.54.03 is newer than driver_max 530"),
    ({"driver_min": "535.54.03", "driver_max": "535.54.03"}, "PASS", "within the expected range"),
    ({"driver_min": "535.9"}, "PASS", "within"),  # 54 > 9: numeric, not text comparison
    ({}, "PASS", "no driver_min/driver_max expected"),
    ({"driver_min": "latest"}, "ERROR", "expect.driver_min: 'latest' is not a dotted version"),
])
def test_driver_version_range(expect, status, fragment):
    record = judge("driver.version", smi("a100-sxm4-v12.xml"), expect)
    assert record["status"] == status and fragment in record["message"]


def test_cuda_driver_version():
    assert judge("cuda.driver_version", smi("a100-sxm4-v12.xml"))["message"] == "the driver supports CUDA up to 12.2"
    assert judge("cuda.driver_version", smi("a100-sxm4-v12.xml"), {"cuda_min": "12.4"})["status"] == "WARN"
    assert judge("cuda.driver_version", smi("rtx-3080-v13.xml"), {"cuda_min": "12.4"})["status"] == "PASS"


def test_ecc_mode_pending_and_expected():
    pending = judge("gpu.ecc_mode", smi("a100-sxm4-v12.xml", ("ecc_mode/pending_ecc", "Disabled")))
    assert pending["status"] == "WARN" and "reboot/reset needed" in pending["message"]
    off = judge("gpu.ecc_mode", smi("rtx-4000-sff-ada-v13.xml"), {"ecc_mode": "enabled"})
    assert off["status"] == "FAIL" and "ECC disabled, expected enabled" in off["message"]
    assert judge("gpu.ecc_mode", smi("quadro-p2000-v12.xml"), {"ecc_mode": "enabled"})["status"] == "FAIL"
    fixing = judge("gpu.ecc_mode", smi("rtx-4000-sff-ada-v13.xml", ("ecc_mode/pending_ecc", "Enabled")), {"ecc_mode": "enabled"})
    assert fixing["status"] == "WARN"


def test_mig_mode_pending_and_expected():
    pending = judge("gpu.mig", smi("a100-sxm4-v12.xml", ("mig_mode/pending_mig", "Disabled")))
    assert pending["status"] == "WARN" and "reset needed" in pending["message"]
    assert judge("gpu.mig", smi("a100-sxm4-v12.xml"), {"mig_mode": "disabled"})["status"] == "FAIL"
    assert judge("gpu.mig", smi("a100-sxm4-v12.xml"), {"mig_mode": "enabled"})["status"] == "PASS"
    assert judge("gpu.mig", smi("tesla-t4.xml"), {"mig_mode": "enabled"})["status"] == "FAIL"
    assert judge("gpu.mig", smi("tesla-t4.xml"))["status"] == "SKIP"


def test_temperature_against_the_gpus_own_thresholds():
    assert judge("gpu.temperature", smi("a100-sxm4-v12.xml", ("temperature/gpu_temp", "90 C")))["status"] == "FAIL"
    hot = judge("gpu.temperature", smi("a100-sxm4-v12.xml", ("temperature/gpu_temp", "86 C")))
    assert hot["status"] == "WARN" and "past its maximum operating temperature" in hot["message"]
    assert judge("gpu.temperature", smi("rtx-4000-sff-ada-v13.xml", ("temperature/gpu_temp_tlimit", "-3 C")))["status"] == "FAIL"
    assert judge("gpu.temperature", smi("a100-sxm4-v12.xml"), {"temperature_warn_c": 25})["status"] == "WARN"
    memory = judge("gpu.temperature", smi("a100-sxm4-v12.xml", ("temperature/memory_temp", "96 C")))
    assert memory["status"] == "WARN" and "memory 96 C" in memory["message"]


def test_power_capped_below_default_warns():
    record = judge("gpu.power", smi("a100-sxm4-v12.xml", ("gpu_power_readings/current_power_limit", "400.00 W")))
    assert record["status"] == "WARN" and "limit 400.0 W below the default 500.0 W" in record["message"]
    assert judge("gpu.power", smi("tesla-t4.xml", ("power_readings/enforced_power_limit", "60.00 W")))["status"] == "WARN"


def test_clocks_lowered_application_clocks_and_slow_busy_gpu():
    lowered = judge("gpu.clocks", smi("a100-sxm4-v12.xml", ("applications_clocks/graphics_clock", "1000 MHz")))
    assert lowered["status"] == "WARN" and "lowered to 1000 of the default 1275 MHz" in lowered["message"]
    slow = judge("gpu.clocks", smi("rtx-3080-v13.xml", ("clocks/sm_clock", "1000 MHz")))
    assert slow["status"] == "WARN" and "SM clock 1000 of 2100 MHz while busy (65 %)" in slow["message"]
    capped = smi("rtx-3080-v13.xml", ("clocks/sm_clock", "1000 MHz"),
                 ("clocks_event_reasons/clocks_event_reason_sw_power_cap", "Active"))
    assert judge("gpu.clocks", capped)["status"] == "PASS"


def test_pcie_replays_over_the_threshold_warn():
    assert judge("gpu.pcie_replay", smi("a100-sxm4-v12.xml", ("pci/replay_counter", "500")))["status"] == "WARN"
    assert judge("gpu.pcie_replay", smi("a100-sxm4-v12.xml", ("pci/replay_rollover_counter", "1")))["status"] == "WARN"
    assert judge("gpu.pcie_replay", smi("a100-sxm4-v12.xml", ("pci/replay_counter", "500")),
                 {"pcie_replay_warn": 1000})["status"] == "PASS"


def nvlink(text):
    return ok({"source": "nvidia-smi", "gpus": parse_nvlink_status(text)})


def test_nvlink_links_up_down_and_partial():
    status = read_fixture("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt")
    assert judge("gpu.nvlink", smi("a100-sxm4-v12.xml"), nvlink=nvlink(status))["status"] == "PASS"
    partial = judge("gpu.nvlink", smi("a100-sxm4-v12.xml"), nvlink=nvlink(status.replace("Link 7: 25 GB/s", "Link 7: <inactive>")))
    assert partial["status"] == "FAIL" and "1 of 12 links inactive (7)" in partial["message"]
    assert named(partial) == [(0, A100_UUID)]
    all_down = status.replace("25 GB/s", "<inactive>")
    assert judge("gpu.nvlink", smi("a100-sxm4-v12.xml"), nvlink=nvlink(all_down))["status"] == "FAIL"  # an SXM GPU
    pcie = all_down.replace("A100-SXM4-40GB", "A100-PCIE-40GB")
    assert judge("gpu.nvlink", smi("a10g.xml"), nvlink=nvlink(pcie))["status"] == "WARN"
    slower = judge("gpu.nvlink", smi("a100-sxm4-v12.xml"), nvlink=nvlink(status.replace("Link 3: 25 GB/s", "Link 3: 12.5 GB/s")))
    assert slower["status"] == "WARN" and "12.5, 25 GB/s" in slower["message"]
    assert judge("gpu.nvlink", smi("a100-sxm4-v12.xml"))["status"] == "SKIP"


def fabric(state):
    return ok({"nvswitches": ["0000:c3:00.0"], "service": "nvidia-fabricmanager", "active_state": state})


def test_fabric_manager_on_nvswitch_hosts():
    assert judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric("active"))["status"] == "PASS"
    inactive = judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric("inactive"))
    assert inactive["status"] == "FAIL" and "nvidia-fabricmanager is inactive" in inactive["message"]
    training = smi("a100-sxm4-v12.xml", ("fabric/state", "In Progress"), ("fabric/status", "N/A"))
    record = judge("gpu.fabric_manager", training, fabric_manager=fabric("active"))
    assert record["status"] == "FAIL" and "state In Progress" in record["message"]
    assert judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric(None))["status"] == "WARN"
    done = smi("a100-sxm4-v12.xml", ("fabric/state", "Completed"), ("fabric/status", "Success"))
    assert judge("gpu.fabric_manager", done, fabric_manager=fabric(None))["status"] == "PASS"
    assert judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"))["status"] == "SKIP"


def pci_gpu(address, driver="nvidia"):
    return {"address": address, "device_id": "0x20b2", "class": "0x030200", "driver": driver}


def test_gpu_on_the_bus_the_driver_does_not_see():
    on_bus = ok({"gpus": [pci_gpu("0000:01:00.0"), pci_gpu("0000:41:00.0")], "nvswitches": []})
    record = judge("runtime.gpu_passthrough", smi("a100-sxm4-v12.xml"), nvidia_pci=on_bus)
    assert record["status"] == "FAIL" and record["message"].endswith("not seen by the driver: 0000:41:00.0")
    container = ok({"is_container": True, "is_vm": False, "is_wsl": False})
    record = judge("runtime.gpu_passthrough", smi("a100-sxm4-v12.xml"), nvidia_pci=on_bus, host=container)
    assert record["status"] == "PASS" and record["message"] == "container: 1 of the host's 2 GPUs are exposed to it"
    to_vm = ok({"gpus": [pci_gpu("0000:01:00.0"), pci_gpu("0000:41:00.0", "vfio-pci")], "nvswitches": []})
    record = judge("runtime.gpu_passthrough", smi("a100-sxm4-v12.xml"), nvidia_pci=to_vm)
    assert record["status"] == "PASS" and "1 bound to vfio-pci" in record["message"]


def test_nvidia_smi_check_fails_when_gpus_are_on_the_bus_without_it():
    on_bus = ok({"gpus": [pci_gpu("0000:01:00.0")], "nvswitches": []})
    record = judge("driver.nvidia_smi", nvidia_pci=on_bus)
    assert record["status"] == "FAIL" and "1 NVIDIA GPU(s) on the PCI bus (0000:01:00.0)" in record["message"]
    assert judge("driver.nvidia_smi")["status"] == "SKIP"
    assert judge("driver.nvidia_smi", nvidia_smi=error("nvidia-smi -q -x timed out after 30s"))["status"] == "ERROR"


def test_nvml_checks():
    data = smi("a100-sxm4-v12.xml")
    same = ok({"available": True, "error": None, "driver_version": "535.54.03", "device_count": 1,
               "devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "uuid": A100_UUID, "pci_bus_id": "00000000:01:00.0"}]})
    assert judge("gpu.nvml_available", data, nvml=same)["status"] == "PASS"
    assert judge("gpu.nvml_devices", data, nvml=same)["status"] == "PASS"
    assert judge("gpu.nvml_devices", data)["status"] == "SKIP"
    other = ok(dict(same["data"], devices=[dict(same["data"]["devices"][0], uuid="GPU-other")]))
    assert judge("gpu.nvml_devices", data, nvml=other)["status"] == "WARN"
    assert judge("gpu.nvml_available", data, nvml=absent("pynvml (nvidia-ml-py) is not installed"))["status"] == "SKIP"


# ---------------------------------------------------------------- bad input through the whole doctor run


def fake_nvidia_smi(tmp_path, body):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


SELECTED = ["driver.nvidia_smi", "gpu.count", "gpu.ecc_errors", "gpu.pcie_link"]


def doctor(path, **kwargs):
    kwargs.setdefault("only", SELECTED)
    return dict((c["id"], c) for c in _doctor.run(nvidia_smi_path=path, **kwargs)["checks"])


@pytest.mark.parametrize("body, fragment", [
    ("head -c 3000 '%s'" % fixture_path("nvidia-smi", "a10g.xml"), "nvidia-smi returned unparsable XML: "),
    ("echo 'this is not xml at all'", "nvidia-smi returned unparsable XML: syntax error"),
    ("exit 0", "nvidia-smi returned unparsable XML: empty output"),
    ("echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2; exit 9",
     "exited with rc 9: NVIDIA-SMI has failed"),
    ("exec sleep 30", "timed out after 1s"),
])
def test_broken_nvidia_smi_is_an_error_on_every_check_never_a_pass(tmp_path, body, fragment):
    checks = doctor(fake_nvidia_smi(tmp_path, body), timeouts={"nvidia_smi": 1})
    # driver.nvidia_smi is the root: ERROR with the reason; the other checks that read the probe are blocked by the
    # root (SKIP naming it, the reason kept in the message), never PASS.
    for check_id in SELECTED:
        expected = "ERROR" if check_id == "driver.nvidia_smi" else "SKIP"
        assert checks[check_id]["status"] == expected, check_id
        assert checks[check_id].get("blocked_by") == ("driver.nvidia_smi" if expected == "SKIP" else None), check_id
        assert fragment in checks[check_id]["message"], (check_id, checks[check_id]["message"])


def test_non_executable_nvidia_smi_path_is_a_permission_error(tmp_path):
    plain = tmp_path / "nvidia-smi"
    plain.write_text(read_fixture("nvidia-smi", "a10g.xml"))
    checks = doctor(str(plain))
    assert all(c["status"] == ("SKIP" if c.get("blocked_by") else "ERROR") and "permission denied" in c["message"]
               for c in checks.values())
    assert checks["driver.nvidia_smi"]["status"] == "ERROR"


def test_missing_nvidia_smi_skips_without_expectations_and_fails_with_them(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, as on this machine
    checks = doctor(None)
    assert set(c["status"] for c in checks.values()) == {"SKIP"}
    checks = doctor(None, expect={"gpu_count": 8})
    assert checks["gpu.count"]["status"] == "FAIL" and checks["gpu.ecc_errors"]["status"] == "SKIP"


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="reads this host's PCI bus and kernel log: needs a host without GPU")
def test_a_replayed_recording_runs_every_gpu_check_through_the_real_probes(tmp_path):
    path = fake_nvidia_smi(tmp_path, "[ \"$1 $2\" = '-q -x' ] || exit 2\n/bin/cat '%s'"
                           % fixture_path("nvidia-smi", "a100-sxm4-v12.xml"))
    # gpu.topology cross-checks with this machine's /sys, which holds none of the recording's GPUs.
    result = _doctor.run(only=["gpu", "driver", "runtime", "cuda.driver_version"],
                         exclude=["gpu.nvlink", "gpu.nvlink_errors", "gpu.topology"],
                         nvidia_smi_path=path, expect={"gpu_count": 1, "gpu_model": "A100"})
    statuses = dict((c["id"], c["status"]) for c in result["checks"])
    assert "FAIL" not in statuses.values() and "ERROR" not in statuses.values(), result["checks"]
    assert statuses["gpu.count"] == statuses["gpu.model"] == "PASS"
    assert statuses["gpu.persistence_mode"] == "WARN"
    assert result["environment"]["gpus"][0]["uuid"] == A100_UUID
    assert result["probes"]["nvidia_smi"]["status"] == "ok" and result["probes"]["kernel_log"]["status"] == "ok"


def test_xid_window_expectation_is_declared_with_the_probe_default():
    spec = _expect.table()["xid_window_hours"]
    assert (spec["kind"], spec["default"]) == ("int", 24)
    with pytest.raises(_doctor.DoctorInputError, match="expect.xid_window_hours: '24h' is not a int"):
        _doctor.run(only=["gpu.xid_errors"], expect={"xid_window_hours": "24h"})


# ---------------------------------------------------------------- kernel log: storms, GPU loss, SXid, Xid 45, Fabric Manager


def recorded(name, first=None, last=None):
    return read_fixture("kernel-log", name).splitlines()[first:last]


def test_a_fatal_xid_followed_by_an_application_storm_still_fails_on_that_gpu():
    real_79 = recorded("nvrm-xid-lines.txt")[1]  # NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
    real_13 = recorded("nvrm-xid-lines.txt")[9]  # NVRM: Xid (0000:01:00): 13, 0005 ...
    dbe = real_79.replace("0000:2b:00", "0000:01:00").replace("79, GPU has fallen off the bus.", "48, An uncorrectable double bit error")
    storm = [real_13 if n % 2 else real_13.replace("): 13,", "): 43,") for n in range(636)]
    log = kernel_log("\n".join([dbe] + storm))
    assert log["data"]["xids_dropped"] == 637 - xid.SAMPLE  # the listed sample is capped ...
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=log)
    assert record["status"] == "FAIL"  # ... the grading is not
    assert record["message"].startswith("XID 48 (double-bit (uncorrectable) ECC error) x1 on GPU 0 (00000000:01:00.0)")
    counts = dict((e["xid"], (e["count"], e["index"], e["uuid"])) for e in record["details"]["gpus"])
    assert counts == {48: (1, 0, A100_UUID), 43: (318, 0, A100_UUID), 13: (318, 0, A100_UUID)}
    assert "replace it if double-bit errors recur" in record["remediation"]


def loss(name, first=None, last=None, gpu="a100-sxm4-v12.xml"):
    return judge("gpu.xid_errors", smi(gpu), kernel_log=kernel_log("\n".join(recorded(name, first, last))))


def test_a_gpu_lost_without_an_xid_line_fails_naming_its_address_and_logged_uuid():
    three_lines = loss("gpu-lost-no-xid-nvsentinel-155.txt")
    assert three_lines["status"] == "FAIL"
    assert "GPU has fallen off the bus (no Xid line) x1 on GPU at 0000:b3:00" in three_lines["message"]
    assert "power-cycle" in three_lines["remediation"]
    # The gpud recording without its Xid 79 and SXid lines: the driver's own fallen-off line, UUID from "GPU at".
    text = [line for line in recorded("fallen-off-bus-with-sxid-gpud.txt") if "Xid" not in line]
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log("\n".join(text)))
    (entry,) = record["details"]["gpus"]
    assert record["status"] == "FAIL" and (entry["pci_bus_id"], entry["uuid"], entry["loss"]) == (
        "0000:91:00", "GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b", "fallen_off_bus")
    assert "GPU at 0000:91:00 (GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b)" in record["message"]
    old_form = loss("fallen-off-bus-old-bumblebee-554.txt")  # address of nvidia-smi's GPU 0
    assert old_form["status"] == "FAIL" and named(old_form) == [(0, A100_UUID)]


def test_the_xid_79_and_the_drivers_own_fallen_off_line_are_one_finding():
    record = loss("fallen-off-bus-with-sxid-gpud.txt", 0, 5)
    assert record["status"] == "FAIL" and [e["xid"] for e in record["details"]["gpus"]] == [79]


def test_init_failures_gsp_timeouts_and_reset_required_fail():
    gsp = loss("gsp-init-failed-ogkm-1230.txt")
    assert gsp["status"] == "FAIL"
    found = [(e["pci_bus_id"], e["driver_instance"], e["loss"], e["count"]) for e in gsp["details"]["gpus"]]
    assert found == [(None, "GPU6", "gsp_timeout", 1), ("0000:a1:00", None, "gsp_init_failed", 2)]
    assert "GPU6 (the driver's GPU number; the line names no PCI address)" in gsp["message"]
    assert "reset the GPU" in gsp["remediation"]
    init = loss("init-failed-cmpunlocker-4.txt")
    assert init["status"] == "FAIL" and named(init) == [(0, A100_UUID)]
    assert init["details"]["gpus"][0]["loss"] == "init_failed"
    reset = loss("reset-required-ogkm-1045.txt")
    assert reset["status"] == "FAIL" and reset["details"]["gpus"][0]["loss"] == "reset_required"
    assert "needs a reset (NV_ERR_RESET_REQUIRED) x1 on GPU0" in reset["message"]


def test_sxid_fatal_fails_and_non_fatal_warns_naming_the_nvswitch():
    fatal = loss("fallen-off-bus-with-sxid-gpud.txt", 5)  # the SXid lines only
    assert fatal["status"] == "FAIL"
    switches = [(s["nvswitch"], s["sxid"], s["fatal"], s["count"]) for s in fatal["details"]["nvswitches"]]
    assert switches == [("0000:06:00.0", 20034, True, 1), ("0000:05:00.0", 20034, True, 1), ("0000:07:00.0", 20034, True, 1)]
    assert "SXid 20034 (LTSSM fault up, fatal) x1 on NVSwitch 0000:06:00.0 (nvidia-nvswitch1)" in fatal["message"]
    assert "reboot the node to reset the NVSwitches" in fatal["remediation"]
    non_fatal = loss("sxid-non-fatal-nvtrust-124.txt")
    assert non_fatal["status"] == "WARN"
    (switch,) = non_fatal["details"]["nvswitches"]
    assert (switch["nvswitch"], switch["sxid"], switch["fatal"], switch["count"]) == ("0000:02:00.0", 22013, False, 1)
    data_only = loss("sxid-data-only-gpud-pr338.txt")  # no Fatal/Non-fatal word: graded by the SXid table
    assert data_only["status"] == "WARN" and data_only["details"]["nvswitches"][0]["sxid"] == 12028
    planted = [line.replace("Non-fatal", "Fatal") for line in recorded("sxid-non-fatal-nvtrust-124.txt")]
    assert judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log("\n".join(planted)))["status"] == "FAIL"


def test_xid_45_naming_a_fatal_cause_is_graded_by_that_cause_unless_it_is_in_the_window():
    record = loss("xid45-caused-by-ogkm-1150.txt")
    assert record["status"] == "FAIL"
    first = record["details"]["gpus"][0]
    assert (first["pci_bus_id"], first["xid"], first["caused_by"], first["graded_as"]) == ("0000:dc:00", 45, [149], 149)
    assert "caused by XID 149 (NVLINK_NETIR_ERROR)" in record["message"]
    # The same lines naming an application fault: graded as that (info), so PASS.
    benign = [line.replace("Xid 149", "Xid 13").replace("Xid 145", "Xid 13") for line in recorded("xid45-caused-by-ogkm-1150.txt")]
    assert judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log("\n".join(benign)))["status"] == "PASS"
    # With the Xid 149 itself in the window, the 45 stays a 45 and the 149 carries the grade.
    one = recorded("xid45-caused-by-ogkm-1150.txt", 0, 1)
    cause = one[0].replace("45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
                           "149, NETIR_LINK_EVT Fatal XC0 i0 Link 00")
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=kernel_log("\n".join([cause] + one)))
    grades = dict((e["xid"], (e["severity"], e.get("graded_as"))) for e in record["details"]["gpus"])
    assert grades == {149: ("critical", None), 45: ("info", None)} and record["status"] == "FAIL"


def test_a_healthy_hgx_boot_log_raises_nothing():
    record = loss("hgx-h100-boot-assembled.txt")
    assert record["status"] == "PASS" and record["message"].startswith("no XID in the kernel log")
    log = kernel_log(read_fixture("kernel-log", "hgx-h100-boot-assembled.txt"))["data"]
    assert log["xid_counts"] == [] and log["gpu_losses"] == [] and log["sxid_counts"] == []
    assert len(log["gpu_uuids"]) == 8


def fabric_with_log(text):
    return ok({"nvswitches": ["0000:86:00.0"], "service": "nvidia-fabricmanager", "active_state": "active",
               "log": dict(xid.scan_fabric_manager_log(text), path="/var/log/fabricmanager.log", status="ok", reason=None)})


def test_fabric_manager_log_errors_grade_the_fabric_manager_check():
    healthy = read_fixture("kernel-log", "fabricmanager-gpud.log")
    assert judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric_with_log(healthy))["status"] == "PASS"
    non_fatal, fatal = recorded("fabricmanager-error-lines.txt")
    warn = judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric_with_log(healthy + non_fatal))
    assert warn["status"] == "WARN" and "non-fatal error 12028 x1 on NVSwitch 00000000:86:00.0" in warn["message"]
    fail = judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric_with_log(healthy + fatal))
    assert fail["status"] == "FAIL" and "fatal error 20034 x1 on NVSwitch 00000000:86:00.0" in fail["message"]
    assert "Reboot the node" in fail["remediation"]
    other = healthy + non_fatal.replace("detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id "
                                        "00000000:86:00.0 physical id 3 port 61", "request to query NVSwitch device failed")
    record = judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric_with_log(other))
    assert record["status"] == "WARN" and "1 [ERROR] entry" in record["message"]
