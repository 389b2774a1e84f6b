"""Kernel log parsing: every real NVRM line form, timestamps, the window, and the PCI address spelling."""

import datetime

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.xid import (
    parse_gpu_uuids,
    parse_loss_lines,
    parse_sxid_lines,
    parse_timestamp,
    parse_xid_lines,
    scan,
    scan_fabric_manager_log,
    since,
)
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import classify, pci_key
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

UTC = datetime.timezone.utc


def test_every_recorded_line_form_is_parsed():
    events = parse_xid_lines(read_fixture("kernel-log", "nvrm-xid-lines.txt"))
    assert [(e["pci"], e["code"], e["pid"], e["process"], e["instance"]) for e in events] == [
        ("0000:2b:00", 79, None, None, None),
        ("0000:10:1c", 63, 1896, None, None),
        ("0000:01:00", 94, 7194, None, "GPU-I:05"),
        ("0000:01:00", 95, 7062, None, None),
        ("0000:19:00", 119, 452531, "cache_mgr_main", None),
        ("0000:05:00", 79, None, None, None),
        ("0000:01:00", 31, None, None, None),
        ("0000:01:00", 13, None, None, None),
    ]
    assert events[0]["message"] == "GPU has fallen off the bus."
    assert events[1]["message"] == "Row Remapper: New row marked for remapping, reset gpu to activate."
    assert events[5]["message"] == "GPU has fallen off the bus."
    assert events[6]["message"].startswith("Ch 00000009")
    assert all(e["timestamp"] is None for e in events)  # syslog dates carry no year: not a timestamp


def test_gpu_uuid_lines_name_the_gpu_at_an_address():
    assert parse_gpu_uuids(read_fixture("kernel-log", "nvrm-xid-lines.txt")) == {
        "0000:2b:00": "GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae",
        "0000:01:00": "GPU-8ba16ede-b303-d769-7297-d266d9383b89",
    }


def test_a_real_log_without_nvidia_lines_has_no_xid():
    assert parse_xid_lines(read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt")) == []


def test_timestamps_of_dmesg_iso_and_journalctl_short_iso():
    first = read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt").splitlines()[0]
    assert parse_timestamp(first) == datetime.datetime(2026, 11, 22, 13, 10, 10, 432034, tzinfo=UTC)
    assert parse_timestamp("2024-05-18T21:02:39+0200 host kernel: x") == datetime.datetime(2024, 5, 18, 19, 2, 39, tzinfo=UTC)
    assert parse_timestamp("May 18 19:02:39 kernel: x") is None


def test_planted_line_in_a_real_dmesg_copy_carries_its_timestamp_and_the_window_keeps_recent_ones():
    log = read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt").splitlines()
    xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
    log.insert(5, "2026-11-21T10:00:00,000000+00:00 " + xid.replace("79", "13", 1).replace("3b", "3c"))
    log.append("2026-11-22T13:20:00,000000+00:00 " + xid)
    events = parse_xid_lines("\n".join(log))
    assert [(e["pci"], e["code"], e["timestamp"]) for e in events] == [
        ("0000:3c:00", 13, "2026-11-21T10:00:00+00:00"), ("0000:3b:00", 79, "2026-11-22T13:20:00+00:00")]
    cutoff = datetime.datetime(2026, 11, 22, 13, 20, tzinfo=UTC) - datetime.timedelta(hours=24)
    assert [e["code"] for e in since(events, cutoff)] == [79]
    assert since([dict(events[0], timestamp=None)], cutoff) == [dict(events[0], timestamp=None)]


def test_pci_addresses_of_every_source_compare_equal():
    assert pci_key("00000000:3B:00.0") == pci_key("0000:3b:00.0") == pci_key("PCI:0000:3b:00") == "0000:3b:00"
    assert pci_key("0000:03:00") == "0000:03:00" and pci_key("01:00.0") == "0000:01:00"
    assert pci_key("not an address") is None and pci_key(None) is None


def test_pci_class_codes():
    assert classify("0x030200") == "gpus" and classify("0x030000") == "gpus"
    assert classify("0x068000") == "nvswitches"
    assert classify("0x040300") is None  # the GPU's HDMI audio function


def test_every_recorded_loss_form_is_found_with_its_address():
    def kinds(name):
        return [(e["kind"], e["pci"], e["instance"]) for e in parse_loss_lines(read_fixture("kernel-log", name))]
    assert kinds("gpu-lost-no-xid-nvsentinel-155.txt") == [("fallen_off_bus", "0000:b3:00", None)]
    assert kinds("fallen-off-bus-old-bumblebee-554.txt") == [("fallen_off_bus", "0000:01:00", None)]
    # The Xid 79 line is an Xid, not a loss line; the driver's own line after it is.
    assert kinds("fallen-off-bus-with-sxid-gpud.txt") == [("fallen_off_bus", "0000:91:00", None)]
    assert kinds("gsp-init-failed-ogkm-1230.txt") == [
        ("gsp_timeout", None, "GPU6"), ("gsp_init_failed", "0000:a1:00", None), ("gsp_init_failed", "0000:a1:00", None)]
    assert kinds("init-failed-cmpunlocker-4.txt") == [("init_failed", "0000:01:00", None)]
    assert kinds("reset-required-ogkm-1045.txt") == [("reset_required", None, "GPU0")]
    assert kinds("hgx-h100-boot-assembled.txt") == [] and kinds("nvrm-xid-lines.txt") == []


def test_sxid_lines_and_their_continuations():
    events = parse_sxid_lines(read_fixture("kernel-log", "sxid-non-fatal-nvtrust-124.txt"))
    assert [(e["address"], e["switch"], e["code"], e["fatal"], e["header"]) for e in events] == [
        ("0000:02:00", 1, 22013, False, True), ("0000:02:00", 1, 22013, None, False), ("0000:02:00", 1, 22013, None, False)]
    summary = scan(read_fixture("kernel-log", "sxid-non-fatal-nvtrust-124.txt"))
    assert [(g["device"], g["code"], g["count"], g["fatal"]) for g in summary["sxid_counts"]] == [("0000:02:00.0", 22013, 1, False)]
    data_only = scan(read_fixture("kernel-log", "sxid-data-only-gpud-pr338.txt"))["sxid_counts"]
    assert [(g["code"], g["count"], g["fatal"], g["first_seen"]) for g in data_only] == [
        (12028, 1, None, "2025-01-25T10:34:54.859532+00:00")]


def test_xid_45_remembers_the_xid_it_names():
    counts = scan(read_fixture("kernel-log", "xid45-caused-by-ogkm-1150.txt"))["xid_counts"]
    assert [(g["pci"], g["code"], g["caused_by"]) for g in counts] == [
        ("0000:dc:00", 45, {"149": 1}), ("0000:ed:00", 45, {"145": 1}), ("0000:ba:00", 45, {"145": 1}),
        ("0000:97:00", 45, {"145": 1})]


def test_scan_counts_the_whole_window_and_applies_the_cutoff():
    log = read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt").splitlines()
    xid = "NVRM: Xid (PCI:0000:3b:00): 13, pid=1234, Graphics Exception"
    log.insert(2, "2026-11-21T10:00:00,000000+00:00 " + xid.replace("13,", "48,"))
    log += ["2026-11-22T13:20:00,000000+00:00 " + xid] * 700
    text = "\n".join(log)
    summary = scan(text)
    assert [(g["code"], g["count"]) for g in summary["xid_counts"]] == [(48, 1), (13, 700)]
    assert summary["xids_total"] == 701 and summary["xids_dropped"] == 701 - len(summary["xids"])
    cutoff = datetime.datetime(2026, 11, 22, 0, 0, tzinfo=UTC)
    assert [(g["code"], g["count"]) for g in scan(text, cutoff)["xid_counts"]] == [(13, 700)]


def test_fabric_manager_log_entries():
    text = read_fixture("kernel-log", "fabricmanager-gpud.log") + read_fixture("kernel-log", "fabricmanager-error-lines.txt")
    found = scan_fabric_manager_log(text)
    assert [(g["address"], g["code"], g["fatal"], g["first_seen"]) for g in found["nvswitch_errors"]] == [
        ("0000:86:00", 12028, False, "2025-02-27T15:10:02"), ("0000:86:00", 20034, True, "2024-07-23T07:53:55")]
    assert found["errors_total"] == 0
    assert scan_fabric_manager_log(text, datetime.datetime(2025, 1, 1))["nvswitch_errors"][0]["code"] == 12028
    assert len(scan_fabric_manager_log(text, datetime.datetime(2025, 1, 1))["nvswitch_errors"]) == 1


# One malformed driver line (issue 23): skipped and counted, the rest judged. Each bad line is a copy of a real line
# (nvrm-xid-lines.txt, fabricmanager-error-lines.txt, sxid-non-fatal-nvtrust-124.txt) with one field edited.
REAL_79 = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()[1].split("kernel: ", 1)[1]
REAL_13 = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()[-1].split("] ", 1)[1]
BAD_LINES = {
    "month 13": "2026-13-22T13:20:00,000000+00:00 " + REAL_13,
    "February 30": "2026-02-30T13:20:00,000000+00:00 " + REAL_13,
    "UTC offset +99:00": "2026-11-22T13:20:00,000000+99:00 " + REAL_13,
    "5,000-digit code": "2026-11-22T13:20:00,000000+00:00 " + REAL_13.replace("13,", "9" * 5000 + ",", 1),
    "5,000-digit pid": "2026-11-22T13:20:00,000000+00:00 " + REAL_79.replace("79,", "31, pid=%s," % ("7" * 5000), 1),
}


def xid_79_log(bad_line):
    """The real dmesg copy with the real Xid 79 line planted, and one malformed NVRM line before it."""
    log = read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt").splitlines()
    log.insert(10, bad_line)
    log.append("2026-11-22T13:20:01,000000+00:00 " + REAL_79)
    return "\n".join(log)


@pytest.mark.parametrize("what", sorted(BAD_LINES))
def test_one_malformed_nvrm_line_is_skipped_and_counted_and_the_xid_79_beside_it_is_read(what):
    found = scan(xid_79_log(BAD_LINES[what]), datetime.datetime(2026, 11, 22, tzinfo=UTC))
    assert [(g["pci"], g["code"], g["count"]) for g in found["xid_counts"]] == [("0000:2b:00", 79, 1)]
    assert found["bad_lines"]["count"] == 1 and found["bad_lines"]["sample"][0]["line"] == 11


def test_malformed_sxid_loss_and_fabric_manager_lines_are_skipped_and_counted():
    sxid = read_fixture("kernel-log", "sxid-non-fatal-nvtrust-124.txt")
    bad_sxid = sxid.replace("22013, Non-fatal", "9" * 5000 + ", Non-fatal", 1)
    gsp = read_fixture("kernel-log", "gsp-init-failed-ogkm-1230.txt").splitlines()
    bad_loss = "2026-13-01T00:00:00+0000 " + gsp[-2].split("] ", 1)[-1]
    found = scan(bad_sxid + "\n" + sxid + "\n" + bad_loss)
    assert [(g["code"], g["count"]) for g in found["sxid_counts"]] == [(22013, 1)]
    assert found["bad_lines"]["count"] == 2
    fm = read_fixture("kernel-log", "fabricmanager-error-lines.txt")
    bad_fm = fm.splitlines()[0].replace("12028", "1" * 5000)
    read = scan_fabric_manager_log(bad_fm + "\n" + fm)
    assert [g["code"] for g in read["nvswitch_errors"]] == [12028, 20034] and read["bad_lines"]["count"] == 1
