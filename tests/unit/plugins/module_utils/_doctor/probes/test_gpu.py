"""The GPU probes, run for real: recorded output replayed by small executables, sysfs/procfs trees laid out
from recordings, and this machine's own dmesg, journalctl, /sys and pynvml (no GPU here)."""

import datetime
import os
import shlex
import sys

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import gpu as gpu_probes
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

TIMEOUTS = {"nvidia_smi": 10, "kernel_log": 10, "torch": 10, "command": 10}
# Tests that read this machine itself expect what the CI machine has: no NVIDIA driver.
no_driver_here = pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this host has an NVIDIA driver")


def options(**extra):
    base = {"timeouts": dict(TIMEOUTS), "nvidia_smi_path": None, "torch_python": None}
    base.update(extra)
    return base


def executable(directory, name, body):
    """A tiny program in directory: the shell commands of body (absolute paths: PATH may be just directory)."""
    path = os.path.join(str(directory), name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return path


def replay(directory, name, stdout_file=None, stderr_text=None, rc=0):
    lines = []
    if stdout_file:
        lines.append("/bin/cat %s" % shlex.quote(stdout_file))
    if stderr_text:
        lines.append("echo %s >&2" % shlex.quote(stderr_text))
    lines.append("exit %d" % rc)
    return executable(directory, name, "\n".join(lines))


def lay_out_pci(root, extra=()):
    """sysfs bus/pci/devices from the recorded CI machine listing, plus extra (bdf, vendor, device, class, driver)."""
    devices = root / "sys" / "bus" / "pci" / "devices"
    rows = [line.split() + [None] for line in read_fixture("sysfs", "kvm-virtio-host-pci.txt").splitlines()
            if line and not line.startswith("#")]
    for bdf, vendor, device, pci_class, driver in rows + list(extra):
        node = devices / bdf
        node.mkdir(parents=True)
        for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
            (node / name).write_text(value + "\n")
        if driver:
            target = root / "sys" / "bus" / "pci" / "drivers" / driver
            target.mkdir(parents=True, exist_ok=True)
            os.symlink(str(target), str(node / "driver"))
    return root


# nvidia-smi -q -x


def test_nvidia_smi_probe_replays_a_recording_through_nvidia_smi_path(tmp_path):
    fake = replay(tmp_path, "nvidia-smi", fixture_path("nvidia-smi", "tesla-t4.xml"))
    data = gpu_probes.probe_nvidia_smi(options(nvidia_smi_path=fake))
    assert data == parse_nvidia_smi(read_fixture("nvidia-smi", "tesla-t4.xml"))
    assert data["gpus"][0]["uuid"] == "GPU-d37e67a5-91dd-3774-a5cb-99096249601a"


def test_nvidia_smi_found_on_path(tmp_path, monkeypatch):
    replay(tmp_path, "nvidia-smi", fixture_path("nvidia-smi", "a10g.xml"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_probes.probe_nvidia_smi(options())["gpus"][0]["name"] == "NVIDIA A10G"


def test_nvidia_smi_absent_from_path_is_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProbeAbsent, match="nvidia-smi not found"):
        gpu_probes.probe_nvidia_smi(options())


def test_unusable_nvidia_smi_path_is_an_error_not_an_absence(tmp_path):
    with pytest.raises(ProbeError, match="does not exist"):
        gpu_probes.probe_nvidia_smi(options(nvidia_smi_path=str(tmp_path / "nope")))
    plain = tmp_path / "nvidia-smi"
    plain.write_text(read_fixture("nvidia-smi", "a10g.xml"))
    with pytest.raises(ProbeError, match="permission denied"):
        gpu_probes.probe_nvidia_smi(options(nvidia_smi_path=str(plain)))


def test_non_zero_rc_reports_the_first_line_nvidia_smi_printed(tmp_path):
    fake = replay(tmp_path, "nvidia-smi", stderr_text="NVIDIA-SMI has failed because it couldn't communicate with "
                                                      "the NVIDIA driver. Make sure that the latest NVIDIA driver "
                                                      "is installed and running.", rc=9)
    with pytest.raises(ProbeError) as info:
        gpu_probes.probe_nvidia_smi(options(nvidia_smi_path=fake))
    assert str(info.value).startswith("nvidia-smi -q -x exited with rc 9: NVIDIA-SMI has failed because")


def test_truncated_xml_is_reported_as_unparsable(tmp_path):
    text = read_fixture("nvidia-smi", "a100-sxm4-v12.xml")
    cut = tmp_path / "cut.xml"
    cut.write_text(text[:4000])
    fake = replay(tmp_path, "nvidia-smi", str(cut))
    with pytest.raises(ProbeError, match="nvidia-smi returned unparsable XML: "):
        gpu_probes.probe_nvidia_smi(options(nvidia_smi_path=fake))


# NVML


@no_driver_here
def test_nvml_without_a_driver_is_data_not_an_error():
    # pynvml is installed in the venv; this machine has no libnvidia-ml.
    data = gpu_probes.probe_nvml(options())
    assert data["available"] is False and data["devices"] == []
    assert data["error"].startswith("NVMLError_LibraryNotFound")


def test_nvml_without_pynvml_is_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    with pytest.raises(ProbeAbsent, match=r"pynvml \(nvidia-ml-py\) is not installed"):
        gpu_probes.probe_nvml(options())


# PCI


@no_driver_here
def test_pci_on_this_machine_finds_no_nvidia_function():
    assert gpu_probes.probe_nvidia_pci(options()) == {"gpus": [], "nvswitches": []}


def test_pci_tree_with_planted_gpus_nvswitch_and_audio_function(tmp_path):
    # Device ids from the recordings' <pci_device_id> (20B210DE: A100 SXM4), 0x1af1: A100-generation NVSwitch.
    root = lay_out_pci(tmp_path, [
        ("0000:01:00.0", "0x10de", "0x20b2", "0x030200", "nvidia"),
        ("0000:01:00.1", "0x10de", "0x20b2", "0x040300", None),
        ("0000:41:00.0", "0x10de", "0x20b2", "0x030200", "vfio-pci"),
        ("0000:c3:00.0", "0x10de", "0x1af1", "0x068000", "nvidia-nvswitch"),
    ])
    data = gpu_probes.probe_nvidia_pci(options(), root=str(root))
    assert [(g["address"], g["driver"]) for g in data["gpus"]] == [("0000:01:00.0", "nvidia"), ("0000:41:00.0", "vfio-pci")]
    assert [s["address"] for s in data["nvswitches"]] == ["0000:c3:00.0"]


def test_pci_without_sysfs_is_absent(tmp_path):
    with pytest.raises(ProbeAbsent):
        gpu_probes.probe_nvidia_pci(options(), root=str(tmp_path))


# kernel module


def test_kernel_module_version_from_proc(tmp_path):
    proc = tmp_path / "proc" / "driver" / "nvidia"
    proc.mkdir(parents=True)
    (proc / "version").write_text(read_fixture("proc-driver-nvidia", "version-515.76.txt"))
    data = gpu_probes.probe_kernel_module(options(), root=str(tmp_path))
    assert data["version"] == "515.76" and data["open_module"] is False
    (proc / "version").write_text(read_fixture("proc-driver-nvidia", "version-open-575.57.08.txt"))
    data = gpu_probes.probe_kernel_module(options(), root=str(tmp_path))
    assert data["version"] == "575.57.08" and data["open_module"] is True


def test_kernel_module_from_sys_module_absent_and_unreadable(tmp_path):
    with pytest.raises(ProbeAbsent, match="not loaded"):
        gpu_probes.probe_kernel_module(options(), root=str(tmp_path))
    module = tmp_path / "sys" / "module" / "nvidia"
    module.mkdir(parents=True)
    (module / "version").write_text("535.54.03\n")
    assert gpu_probes.probe_kernel_module(options(), root=str(tmp_path))["version"] == "535.54.03"
    proc = tmp_path / "proc" / "driver" / "nvidia"
    proc.mkdir(parents=True)
    (proc / "version").write_text("garbage\n")
    with pytest.raises(ProbeError, match="no version in 'garbage'"):
        gpu_probes.probe_kernel_module(options(), root=str(tmp_path))


@no_driver_here
def test_kernel_module_absent_on_this_machine():
    with pytest.raises(ProbeAbsent):
        gpu_probes.probe_kernel_module(options())


# kernel log


@no_driver_here
def test_kernel_log_on_this_machine_falls_back_from_the_missing_journal_to_dmesg():
    data = gpu_probes.probe_kernel_log(options())
    assert data["source"] == "dmesg" and data["window_applied"] is True and data["xids"] == []
    assert "No journal files were found" in data["journal_problem"]


def planted_dmesg(tmp_path, now):
    """A copy of the recorded dmesg with XID 79 an hour ago and an XID 13 two days ago."""
    lines = read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt").splitlines()
    iso = "%Y-%m-%dT%H:%M:%S,000000+00:00"
    lines.insert(3, (now - datetime.timedelta(days=2)).strftime(iso) + " NVRM: Xid (PCI:0000:01:00): 13, pid=77, Graphics Exception")
    lines.append((now - datetime.timedelta(hours=1)).strftime(iso) + " NVRM: Xid (PCI:0000:01:00): 79, pid=1234, GPU has fallen off the bus.")
    path = tmp_path / "dmesg.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_kernel_log_replayed_without_journal_keeps_only_xids_in_the_window(tmp_path, monkeypatch):
    now = datetime.datetime.now(datetime.timezone.utc)
    replay(tmp_path, "journalctl", fixture_path("kernel-log", "journalctl-no-journal.stdout"),
           read_fixture("kernel-log", "journalctl-no-journal.stderr").strip())
    replay(tmp_path, "dmesg", planted_dmesg(tmp_path, now))
    monkeypatch.setenv("PATH", str(tmp_path))
    data = gpu_probes.probe_kernel_log(options())
    assert data["source"] == "dmesg"
    assert [(x["pci"], x["code"], x["pid"]) for x in data["xids"]] == [("0000:01:00", 79, 1234)]
    wider = gpu_probes.probe_kernel_log(options(xid_window_hours=72))
    assert [x["code"] for x in wider["xids"]] == [13, 79] and wider["window_hours"] == 72


def test_kernel_log_from_journalctl_when_it_works(tmp_path, monkeypatch):
    log = tmp_path / "journal.txt"
    log.write_text("2026-11-22T13:20:00+0000 gpu01 kernel: NVRM: GPU at PCI:0000:3b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae\n"
                   "2026-11-22T13:20:00+0000 gpu01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n")
    replay(tmp_path, "journalctl", str(log))
    executable(tmp_path, "dmesg", "exit 99")  # must not be needed
    monkeypatch.setenv("PATH", str(tmp_path))
    data = gpu_probes.probe_kernel_log(options())
    assert data["source"] == "journalctl" and data["journal_problem"] is None
    assert [(x["pci"], x["code"], x["timestamp"]) for x in data["xids"]] == [("0000:3b:00", 79, "2026-11-22T13:20:00+00:00")]
    assert data["gpu_uuids"] == {"0000:3b:00": "GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae"}


def test_a_journal_without_kernel_lines_in_the_window_falls_back_to_dmesg(tmp_path, monkeypatch):
    # The recorded stdout alone (rc 0, no stderr): journald may not be reading the kernel log.
    replay(tmp_path, "journalctl", fixture_path("kernel-log", "journalctl-no-journal.stdout"))
    replay(tmp_path, "dmesg", planted_dmesg(tmp_path, datetime.datetime.now(datetime.timezone.utc)))
    monkeypatch.setenv("PATH", str(tmp_path))
    data = gpu_probes.probe_kernel_log(options())
    assert data["source"] == "dmesg" and [x["code"] for x in data["xids"]] == [79]
    assert data["journal_problem"] == "journalctl -k: no kernel message in the last 24 h"


def test_restricted_dmesg_is_an_error_with_the_become_hint(tmp_path, monkeypatch):
    replay(tmp_path, "dmesg", stderr_text="dmesg: read kernel buffer failed: Operation not permitted", rc=1)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProbeError) as info:
        gpu_probes.probe_kernel_log(options())
    assert "Operation not permitted" in str(info.value) and "dmesg_restrict" in str(info.value)
    assert "become" in str(info.value)


def test_dmesg_without_time_format_falls_back_to_the_whole_buffer(tmp_path, monkeypatch):
    log = tmp_path / "plain.txt"
    log.write_text("[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.\n")
    executable(tmp_path, "dmesg", 'if [ "$1" = "--time-format" ]; then echo "dmesg: unrecognized option '
                                  "'--time-format'\" >&2; exit 1; fi\n/bin/cat '%s'" % log)
    monkeypatch.setenv("PATH", str(tmp_path))
    data = gpu_probes.probe_kernel_log(options())
    assert data["window_applied"] is False and [x["code"] for x in data["xids"]] == [79]


def test_bad_window_and_no_tool_at_all(tmp_path, monkeypatch):
    with pytest.raises(ProbeError, match="xid_window_hours: 0"):
        gpu_probes.probe_kernel_log(options(xid_window_hours=0))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProbeAbsent):
        gpu_probes.probe_kernel_log(options())


def test_xid_storm_keeps_the_newest_events_and_counts_every_one(tmp_path, monkeypatch):
    line = "2026-11-22T13:20:00+0000 h kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, Graphics Exception\n"
    log = tmp_path / "storm.txt"
    log.write_text("".join(line % pid for pid in range(gpu_probes.MAX_XID_EVENTS + 20)))
    replay(tmp_path, "journalctl", str(log))
    monkeypatch.setenv("PATH", str(tmp_path))
    data = gpu_probes.probe_kernel_log(options())
    assert len(data["xids"]) == gpu_probes.MAX_XID_EVENTS and data["xids_dropped"] == 20
    assert data["xids"][-1]["pid"] == gpu_probes.MAX_XID_EVENTS + 19
    assert [(g["pci"], g["code"], g["count"]) for g in data["xid_counts"]] == [("0000:3b:00", 13, gpu_probes.MAX_XID_EVENTS + 20)]


def test_one_deadline_covers_journalctl_and_the_dmesg_fallback(tmp_path, monkeypatch):
    calls = tmp_path / "calls.txt"
    executable(tmp_path, "journalctl", "echo journalctl >> '%s'\nexec /bin/sleep 30" % calls)
    executable(tmp_path, "dmesg", "echo dmesg >> '%s'\n/bin/cat '%s'" % (
        calls, planted_dmesg(tmp_path, datetime.datetime.now(datetime.timezone.utc))))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProbeError) as info:
        gpu_probes.probe_kernel_log(options(timeouts=dict(TIMEOUTS, kernel_log=1)))
    reason = str(info.value)
    assert "deadline (timeouts.kernel_log) ran out before dmesg could run" in reason and "timed out after 1s" in reason
    assert calls.read_text().splitlines() == ["journalctl"]  # journalctl once, dmesg never started


# NVLink and Fabric Manager


def nvlink_smi(tmp_path, status_file, rc=0):
    """nvidia-smi answering `nvlink --status` from a recording (NVML does not initialise here)."""
    return executable(tmp_path, "nvidia-smi", '[ "$1 $2" = "nvlink --status" ] || exit 2\n/bin/cat \'%s\'\nexit %d'
                      % (status_file, rc))


def test_nvlink_from_nvidia_smi_when_nvml_does_not_initialise(tmp_path):
    data = gpu_probes.probe_nvlink(options(nvidia_smi_path=nvlink_smi(
        tmp_path, fixture_path("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt"))))
    assert data["source"] == "nvidia-smi" and len(data["gpus"][0]["links"]) == 12


def test_nvlink_absent_on_gpus_without_links_and_error_on_failure(tmp_path):
    no_links = tmp_path / "t4.txt"
    no_links.write_text("GPU 0: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)\n")
    with pytest.raises(ProbeAbsent, match="no GPU on this host has NVLink"):
        gpu_probes.probe_nvlink(options(nvidia_smi_path=nvlink_smi(tmp_path, str(no_links))))
    with pytest.raises(ProbeError, match="nvlink --status exited with rc 3"):
        gpu_probes.probe_nvlink(options(nvidia_smi_path=nvlink_smi(tmp_path, str(no_links), rc=3)))


def test_nvlink_lines_that_cannot_be_read_are_counted_and_never_an_absence(tmp_path):
    text = read_fixture("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt")
    one_bad = tmp_path / "one-bad.txt"
    one_bad.write_text(text.replace("Link 3: 25 GB/s", "Link 3: 1.2.3 GB/s"))
    data = gpu_probes.probe_nvlink(options(nvidia_smi_path=nvlink_smi(tmp_path, str(one_bad))))
    assert len(data["gpus"][0]["links"]) == 11 and data["bad_lines"]["count"] == 1
    # Issue 23: with the GPU's own line unreadable, its links were attached to no GPU: "no NVLink" (absent).
    all_bad = tmp_path / "all-bad.txt"
    all_bad.write_text(text.replace("GPU 0:", "GPU %s:" % ("9" * 5000), 1))
    with pytest.raises(ProbeError, match=r"nvlink --status: no link read, 13 unreadable lines skipped \(line 1: "):
        gpu_probes.probe_nvlink(options(nvidia_smi_path=nvlink_smi(tmp_path, str(all_bad))))


def test_fabric_manager_absent_without_nvswitch_and_state_with_one(tmp_path, monkeypatch):
    with pytest.raises(ProbeAbsent, match="no NVSwitch"):
        gpu_probes.probe_fabric_manager(options(), root=str(lay_out_pci(tmp_path / "plain")))
    root = lay_out_pci(tmp_path / "hgx", [("0000:c3:00.0", "0x10de", "0x1af1", "0x068000", None)])
    bindir = tmp_path / "bin"
    bindir.mkdir()
    executable(bindir, "systemctl", '[ "$2" = "nvidia-fabricmanager" ] || exit 4\necho inactive\nexit 3')
    monkeypatch.setenv("PATH", str(bindir))
    missing = str(tmp_path / "no-such.log")
    data = gpu_probes.probe_fabric_manager(options(fabric_manager_log=missing), root=str(root))
    assert data == {"nvswitches": ["0000:c3:00.0"], "service": "nvidia-fabricmanager", "active_state": "inactive",
                    "log": {"path": missing, "status": "absent", "reason": "%s does not exist" % missing,
                            "nvswitch_errors": [], "errors": [], "errors_total": 0}}
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gpu_probes.probe_fabric_manager(options(fabric_manager_log=missing), root=str(root))["active_state"] is None


def fabric_log_copy(tmp_path, now, *planted):
    """A copy of the recorded Fabric Manager log with its timestamps moved to an hour ago, and lines planted after it."""
    stamp = (now - datetime.timedelta(hours=1)).strftime("%b %d %Y %H:%M:%S")
    lines = []
    for line in read_fixture("kernel-log", "fabricmanager-gpud.log").splitlines() + list(planted):
        lines.append("[%s]%s" % (stamp, line.split("]", 1)[1]) if line.startswith("[") and " 20" in line[:14] else line)
    path = tmp_path / "fabricmanager.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_fabric_manager_log_errors_are_read_within_the_window(tmp_path, monkeypatch):
    root = lay_out_pci(tmp_path / "hgx", [("0000:86:00.0", "0x10de", "0x1af1", "0x068000", None)])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    now = datetime.datetime.now()
    non_fatal, fatal = read_fixture("kernel-log", "fabricmanager-error-lines.txt").splitlines()
    healthy = gpu_probes.probe_fabric_manager(options(fabric_manager_log=fabric_log_copy(tmp_path, now)), root=str(root))
    assert healthy["log"]["status"] == "ok" and healthy["log"]["nvswitch_errors"] == [] and healthy["log"]["errors_total"] == 0
    path = fabric_log_copy(tmp_path, now, non_fatal, fatal, non_fatal)
    log = gpu_probes.probe_fabric_manager(options(fabric_manager_log=path), root=str(root))["log"]
    assert [(e["address"], e["code"], e["count"], e["fatal"]) for e in log["nvswitch_errors"]] == [
        ("0000:86:00", 12028, 2, False), ("0000:86:00", 20034, 1, True)]
    # The recorded dates are in 2024/2025: outside a 24 h window they are not read.
    old = tmp_path / "old.log"
    old.write_text(read_fixture("kernel-log", "fabricmanager-error-lines.txt"))
    assert gpu_probes.probe_fabric_manager(options(fabric_manager_log=str(old)), root=str(root))["log"]["nvswitch_errors"] == []


# NVML when it works: this machine has no GPU, so the calls of the real pynvml module are pointed at
# the A100 recording. monkeypatch.setattr refuses a name pynvml does not have, so a call the probes
# make that the installed nvidia-ml-py lacks fails here.


class _PciInfo:
    def __init__(self, bus_id):
        self.busId = bus_id


def nvml_from_recording(monkeypatch, name, active_links):
    import pynvml
    data = parse_nvidia_smi(read_fixture("nvidia-smi", name))
    calls = []

    def link_state(handle, link):
        if link >= len(active_links):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED if active_links[link] else pynvml.NVML_FEATURE_DISABLED

    for attribute, value in (
            ("nvmlInit", lambda: calls.append("init")),
            ("nvmlShutdown", lambda: calls.append("shutdown")),
            ("nvmlSystemGetDriverVersion", lambda: data["driver_version"]),
            ("nvmlDeviceGetCount", lambda: len(data["gpus"])),
            ("nvmlDeviceGetHandleByIndex", lambda index: data["gpus"][index]),
            ("nvmlDeviceGetName", lambda gpu: gpu["name"]),
            ("nvmlDeviceGetUUID", lambda gpu: gpu["uuid"].encode()),  # older bindings return bytes
            ("nvmlDeviceGetPciInfo", lambda gpu: _PciInfo(gpu["pci_bus_id"])),
            ("nvmlDeviceGetNvLinkState", link_state)):
        monkeypatch.setattr(pynvml, attribute, value)
    return calls


def test_nvml_lists_devices_and_always_shuts_down(monkeypatch):
    calls = nvml_from_recording(monkeypatch, "a100-sxm4-v12.xml", [])
    data = gpu_probes.probe_nvml(options())
    assert data == {"available": True, "error": None, "driver_version": "535.54.03", "device_count": 1,
                    "devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB",
                                 "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298", "pci_bus_id": "00000000:01:00.0"}]}
    assert calls == ["init", "shutdown"]


def test_nvlink_prefers_nvml_when_it_initialises(monkeypatch):
    calls = nvml_from_recording(monkeypatch, "a100-sxm4-v12.xml", [True] * 11 + [False])
    data = gpu_probes.probe_nvlink(options(nvidia_smi_path="/nonexistent/nvidia-smi"))  # never run
    assert data["source"] == "nvml" and calls == ["init", "shutdown"]
    links = data["gpus"][0]["links"]
    assert len(links) == 12 and [link["link"] for link in links if not link["active"]] == [11]
    nvml_from_recording(monkeypatch, "tesla-t4.xml", [])
    with pytest.raises(ProbeAbsent, match="no GPU on this host has NVLink"):
        gpu_probes.probe_nvlink(options())


def test_a_hung_nvml_call_times_out(monkeypatch):
    import threading

    import pynvml
    release = threading.Event()
    nvml_from_recording(monkeypatch, "a100-sxm4-v12.xml", [])
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", lambda: release.wait(30) and 0)
    try:
        with pytest.raises(ProbeError, match="NVML timed out after 1s"):
            gpu_probes.probe_nvml(options(timeouts=dict(TIMEOUTS, nvidia_smi=1)))
    finally:
        release.set()


@pytest.mark.gpu
def test_on_a_real_gpu_host_every_probe_reads_and_every_gpu_check_judges():
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
    data = gpu_probes.probe_nvidia_smi(options())
    assert data["gpus"] and all(g["uuid"].startswith("GPU-") for g in data["gpus"])
    assert gpu_probes.probe_nvml(options())["device_count"] == len(data["gpus"])
    assert gpu_probes.probe_kernel_module(options())["version"] == data["driver_version"]
    result = doctor.run(only=["gpu", "driver", "runtime.gpu_passthrough", "cuda.driver_version"])
    assert not [c for c in result["checks"] if c["message"].startswith("check crashed")]
