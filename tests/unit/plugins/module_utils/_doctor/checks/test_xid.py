"""gpu.xid_errors on recorded kernel-log lines (tests/fixtures/kernel-log) beside recorded nvidia-smi output."""


import pytest

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.tests.support.envelopes import error
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.nvidia import A100_UUID, gpus, judge, kernel_log, named, recorded, smi


def plant(log_name, *lines):
    """A copy of a recorded kernel log with lines added at the end."""
    return read_fixture("kernel-log", log_name).rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def test_xid_79_naming_a_gpus_address_fails_on_that_gpu_and_repeats_are_counted_once():
    line = "2026-11-22T13:20:%02d,000000+00:00 NVRM: Xid (PCI:0000:01:00): 79, pid=1234, GPU has fallen off the bus."
    log = kernel_log(plant("dmesg-iso-kvm-guest.txt", *(line % s for s in range(3))))
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml", gpus(2)), kernel_log=log)
    assert record["status"] == "FAIL"
    assert record["message"].startswith("XID 79 (GPU has fallen off the bus) x3 on GPU 0 00000000:01:00.0 %s" % A100_UUID)
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


def test_xid_window_expectation_is_declared_with_the_probe_default():
    spec = _expect.table()["xid_window_hours"]
    assert (spec["kind"], spec["default"]) == ("int", 24)
    with pytest.raises(_doctor.DoctorInputError, match="expect.xid_window_hours: '24h' is not a int"):
        _doctor.run(only=["gpu.xid_errors"], expect={"xid_window_hours": "24h"})


def test_a_fatal_xid_followed_by_an_application_storm_still_fails_on_that_gpu():
    real_79 = recorded("nvrm-xid-lines.txt")[1]  # NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
    real_13 = recorded("nvrm-xid-lines.txt")[9]  # NVRM: Xid (0000:01:00): 13, 0005 ...
    dbe = real_79.replace("0000:2b:00", "0000:01:00").replace("79, GPU has fallen off the bus.", "48, An uncorrectable double bit error")
    storm = [real_13 if n % 2 else real_13.replace("): 13,", "): 43,") for n in range(636)]
    log = kernel_log("\n".join([dbe] + storm))
    assert log["data"]["xids_dropped"] == 637 - xid.SAMPLE  # the listed sample is capped ...
    record = judge("gpu.xid_errors", smi("a100-sxm4-v12.xml"), kernel_log=log)
    assert record["status"] == "FAIL"  # ... the grading is not
    assert record["message"].startswith("XID 48 (double-bit (uncorrectable) ECC error) x1 on GPU 0 00000000:01:00.0 %s" % A100_UUID)
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
    assert "GPU at 0000:91:00 GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b" in record["message"]
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
