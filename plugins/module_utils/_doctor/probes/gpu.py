# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU and driver probes: nvidia-smi, NVML, PCI functions, kernel module, kernel log, NVLink, Fabric Manager.

Each probe reads, never judges; parsing lives in the pure modules
nvidia_smi.py, xid.py and pci.py. Probes that read /sys or /proc take a
``root`` keyword so tests can lay out a tree under a temporary directory.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import os
import re

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.xid import parse_gpu_uuids, parse_xid_lines, since
from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, call_with_timeout
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import NvidiaSmiParseError, parse_nvidia_smi, parse_nvlink_status
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import scan_nvidia_functions

ROOT = "/"
XID_WINDOW_HOURS = 24
# An XID storm (one per kernel launch) must not fill the result: the newest ones are kept.
MAX_XID_EVENTS = 500
FABRIC_MANAGER_SERVICE = "nvidia-fabricmanager"


def _first_line(*texts):
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return "no output"


def _nvidia_smi(options):
    """Absolute path of nvidia-smi; ProbeAbsent when not installed, ProbeError when an explicit path is unusable."""
    override = options.get("nvidia_smi_path")
    if override:
        if not os.path.exists(override):
            raise ProbeError("nvidia_smi_path %s does not exist" % override)
        if os.path.isdir(override) or not os.access(override, os.X_OK):
            raise ProbeError("nvidia_smi_path %s is not an executable file (permission denied)" % override)
        return override
    path = command.find_binary("nvidia-smi")
    if not path:
        raise ProbeAbsent("nvidia-smi not found on PATH (no NVIDIA driver installed?)")
    return path


def probe_nvidia_smi(options):
    """``nvidia-smi -q -x``, once per run, parsed: every GPU field the checks judge."""
    binary = _nvidia_smi(options)
    rc, out, err = command.run([binary, "-q", "-x"], options["timeouts"]["nvidia_smi"])
    if rc != 0:
        raise ProbeError("nvidia-smi -q -x exited with rc %s: %s" % (rc, _first_line(err, out)))
    try:
        return parse_nvidia_smi(out)
    except NvidiaSmiParseError as exc:
        raise ProbeError("nvidia-smi returned unparsable XML: %s" % exc)


def _as_text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _nvml_session(options, work):
    """Import pynvml, init, run work(pynvml), always shut down.

    Returns (available, value_or_error_text). ProbeAbsent when pynvml is not installed.
    """
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise ProbeAbsent("pynvml (nvidia-ml-py) is not installed")

    def session():
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            # No driver, or a driver/library mismatch: that is data, not a probe failure.
            return False, "%s: %s" % (type(exc).__name__, exc)
        try:
            return True, work(pynvml)
        finally:
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass

    try:
        return call_with_timeout(session, options["timeouts"]["nvidia_smi"], "NVML")
    except pynvml.NVMLError as exc:
        raise ProbeError("NVML query failed: %s: %s" % (type(exc).__name__, exc))


def _nvml_devices(pynvml):
    devices = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        devices.append({
            "index": index,
            "name": _as_text(pynvml.nvmlDeviceGetName(handle)),
            "uuid": _as_text(pynvml.nvmlDeviceGetUUID(handle)),
            "pci_bus_id": _as_text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
        })
    return {"driver_version": _as_text(pynvml.nvmlSystemGetDriverVersion()), "device_count": len(devices),
            "devices": devices}


def probe_nvml(options):
    """NVML through pynvml: whether it initialises here and which devices it lists."""
    available, value = _nvml_session(options, _nvml_devices)
    if not available:
        return {"available": False, "error": value, "driver_version": None, "device_count": None, "devices": []}
    return dict(value, available=True, error=None)


def probe_nvidia_pci(options, root=None):
    """NVIDIA GPU and NVSwitch PCI functions from /sys/bus/pci (what is plugged in, whatever the driver says)."""
    devices_dir = os.path.join(root or ROOT, "sys/bus/pci/devices")
    if not os.path.isdir(devices_dir):
        raise ProbeAbsent("%s does not exist" % devices_dir)
    try:
        return scan_nvidia_functions(devices_dir)
    except OSError as exc:
        raise ProbeError("cannot read %s: %s" % (devices_dir, exc))


_MODULE_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")


def parse_proc_driver_version(text):
    """The version in /proc/driver/nvidia/version ('NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  ...')."""
    match = _MODULE_VERSION.search(text or "")
    return match.group(1) if match else None


def probe_kernel_module(options, root=None):
    """The loaded nvidia kernel module's version; ProbeAbsent when the module is not loaded."""
    base = root or ROOT
    proc = os.path.join(base, "proc/driver/nvidia/version")
    sys_version = os.path.join(base, "sys/module/nvidia/version")
    if os.path.exists(proc):
        text = command.read_text(proc)
        version = parse_proc_driver_version(text)
        if version is None:
            raise ProbeError("%s: no version in %r" % (proc, _first_line(text)))
        return {"version": version, "source": proc, "open_module": "Open Kernel Module" in text}
    if os.path.exists(sys_version):
        return {"version": command.read_text(sys_version).strip(), "source": sys_version, "open_module": None}
    raise ProbeAbsent("the nvidia kernel module is not loaded (no %s)" % proc)


# journalctl answers rc 0 with these when it cannot show the kernel log: fall back to dmesg.
_JOURNAL_UNUSABLE = ("No journal files were found", "No journal files were opened",
                     "not seeing messages from other users and the system")
_DMESG_RESTRICTED = ("kernel.dmesg_restrict=1 hides the kernel log from unprivileged users: run doctor with "
                     "become: true (or as a member of the adm/systemd-journal group, which lets journalctl read it)")


def _journal(hours, timeout):
    """The kernel log of the last hours from journald, or (None, why not)."""
    binary = command.find_binary("journalctl")
    if not binary:
        return None, "journalctl not found"
    try:
        rc, out, err = command.run([binary, "-k", "--since", "-%dh" % hours, "-o", "short-iso", "--no-pager"], timeout)
    except ProbeError as exc:
        return None, str(exc)
    unusable = [marker for marker in _JOURNAL_UNUSABLE if marker in out or marker in err]
    if rc != 0 or unusable:
        return None, "journalctl -k: %s" % (unusable[0] if unusable else _first_line(err, out))
    if not any(line.strip() and not line.startswith("-- ") for line in out.splitlines()):
        # Not one kernel line in the window: journald may not be reading the kernel log (ReadKMsg=no).
        return None, "journalctl -k: no kernel message in the last %d h" % hours
    return out, None


def _dmesg(timeout):
    """The kernel ring buffer, (text, has ISO timestamps)."""
    binary = command.find_binary("dmesg")
    if not binary:
        raise ProbeAbsent("neither a usable journalctl nor dmesg found")
    rc, out, err = command.run([binary, "--time-format", "iso"], timeout)
    timestamped = True
    if rc != 0 and ("unrecognized option" in err or "invalid option" in err or "unknown option" in err):
        # busybox dmesg: no wall-clock timestamps, the whole buffer since boot.
        rc, out, err = command.run([binary], timeout)
        timestamped = False
    if rc != 0:
        if "Operation not permitted" in err or "Permission denied" in err:
            raise ProbeError("dmesg: %s; %s" % (_first_line(err), _DMESG_RESTRICTED))
        raise ProbeError("dmesg exited with rc %s: %s" % (rc, _first_line(err, out)))
    return out, timestamped


def probe_kernel_log(options, now=None):
    """NVRM Xid lines of the kernel log within the XID window (expect xid_window_hours), not the log itself."""
    hours = (options.get("expect") or {}).get("xid_window_hours")
    hours = XID_WINDOW_HOURS if hours is None else hours
    if hours <= 0:
        raise ProbeError("expect.xid_window_hours: %r is not a positive number of hours" % hours)
    timeout = options["timeouts"]["kernel_log"]
    text, journal_problem = _journal(hours, timeout)
    source, window_applied = "journalctl", True
    if text is None:
        text, window_applied = _dmesg(timeout)
        source = "dmesg"
    events = parse_xid_lines(text)
    if source == "dmesg" and window_applied:
        cutoff = (now or datetime.datetime.now(datetime.timezone.utc)) - datetime.timedelta(hours=hours)
        events = since(events, cutoff)
    return {
        "source": source,
        "journal_problem": journal_problem,
        "window_hours": hours,
        # False for a dmesg without timestamps: the events span the whole boot.
        "window_applied": window_applied,
        "xids": events[-MAX_XID_EVENTS:],
        "xids_dropped": max(0, len(events) - MAX_XID_EVENTS),
        "gpu_uuids": parse_gpu_uuids(text),
    }


def _nvml_nvlinks(pynvml):
    gpus = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        links = []
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                state = pynvml.nvmlDeviceGetNvLinkState(handle, link)
            except pynvml.NVMLError:
                continue  # not supported, or past this GPU's last link
            links.append({"link": link, "active": state == pynvml.NVML_FEATURE_ENABLED, "speed_gbps": None,
                          "state": "active" if state == pynvml.NVML_FEATURE_ENABLED else "inactive"})
        gpus.append({"index": index, "name": _as_text(pynvml.nvmlDeviceGetName(handle)),
                     "uuid": _as_text(pynvml.nvmlDeviceGetUUID(handle)), "links": links})
    return gpus


def probe_nvlink(options):
    """NVLink state per GPU and link: NVML when it initialises, else ``nvidia-smi nvlink --status``."""
    gpus, source = None, None
    try:
        available, value = _nvml_session(options, _nvml_nvlinks)
        if available:
            gpus, source = value, "nvml"
    except ProbeAbsent:
        pass
    if gpus is None:
        # The only nvidia-smi call besides -q -x: its XML has no NVLink link state.
        binary = _nvidia_smi(options)
        rc, out, err = command.run([binary, "nvlink", "--status"], options["timeouts"]["nvidia_smi"])
        if rc != 0:
            raise ProbeError("nvidia-smi nvlink --status exited with rc %s: %s" % (rc, _first_line(err, out)))
        gpus, source = parse_nvlink_status(out), "nvidia-smi"
    if not any(gpu["links"] for gpu in gpus):
        raise ProbeAbsent("no GPU on this host has NVLink")
    return {"source": source, "gpus": gpus}


def probe_fabric_manager(options, root=None):
    """Whether nvidia-fabricmanager runs; ProbeAbsent on hosts without NVSwitch, where it has nothing to do."""
    devices_dir = os.path.join(root or ROOT, "sys/bus/pci/devices")
    switches = scan_nvidia_functions(devices_dir)["nvswitches"] if os.path.isdir(devices_dir) else []
    if not switches:
        raise ProbeAbsent("no NVSwitch on this host: Fabric Manager is not needed")
    state = None
    systemctl = command.find_binary("systemctl")
    if systemctl:
        # rc is non-zero for every state but active; the state word on stdout is the answer.
        rc, out, err = command.run([systemctl, "is-active", FABRIC_MANAGER_SERVICE], options["timeouts"]["command"])
        state = _first_line(out, err) if (out or err).strip() else "rc %s" % rc
    return {"nvswitches": [switch["address"] for switch in switches], "service": FABRIC_MANAGER_SERVICE,
            "active_state": state}
