"""Kernel log parsing: every real NVRM line form, timestamps, the window, and the PCI address spelling."""

import datetime

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.xid import parse_gpu_uuids, parse_timestamp, parse_xid_lines, since
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
