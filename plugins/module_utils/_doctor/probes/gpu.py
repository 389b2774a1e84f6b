# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU and driver probes: nvidia-smi, NVML, PCI functions, kernel module, kernel log, NVLink, Fabric Manager.

Each probe reads, never judges; reading and parsing live in _host (gpus/nvidia_smi.py, gpus/nvml.py, pci.py)
and xid.py. Probes that read /sys or /proc take a
``root`` keyword so tests can lay out a tree under a temporary directory.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import os
import re
import time
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.plugins.module_utils._host import command, files
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvml
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import find_nvidia_smi, first_line, parse_nvlink_status, read_gpus
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines, describe
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import scan_nvidia_functions
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_ABSENT, READ_FAILED, READ_OK

Options = Mapping[str, Any]

ROOT = "/"
XID_WINDOW_HOURS = 24
# An XID storm (one per kernel launch) must not fill the result: every event is counted, the newest are listed.
MAX_XID_EVENTS = xid.SAMPLE
FABRIC_MANAGER_SERVICE = "nvidia-fabricmanager"
FABRIC_MANAGER_LOG = "/var/log/fabricmanager.log"
# Only the end of a large Fabric Manager log is read (its newest entries).
FABRIC_MANAGER_LOG_TAIL = 4 * 1024 * 1024


_first_line = first_line


def _nvidia_smi(options: Options) -> str:
    """Absolute path of nvidia-smi (option nvidia_smi_path, else PATH); see _host.gpus.nvidia_smi.find_nvidia_smi."""
    return find_nvidia_smi(options.get("nvidia_smi_path"))


def probe_nvidia_smi(options: Options) -> dict[str, Any]:
    """``nvidia-smi -q -x``, once per run, parsed: every GPU field the checks judge."""
    return read_gpus(_nvidia_smi(options), options["timeouts"]["nvidia_smi"])


def _nvml_session(options: Options, work: Callable[[Any], Any]) -> tuple[bool, Any]:
    """An NVML session bounded by timeouts.nvidia_smi: (available, value_or_error_text)."""
    return nvml.session(work, options["timeouts"]["nvidia_smi"])


def probe_nvml(options: Options) -> dict[str, Any]:
    """NVML through pynvml: whether it initialises here and which devices it lists."""
    available, value = _nvml_session(options, nvml.devices)
    if not available:
        return {"available": False, "error": value, "driver_version": None, "device_count": None, "devices": []}
    return dict(value, available=True, error=None)


def probe_nvidia_pci(options: Options, root: Optional[str] = None) -> dict[str, list[dict[str, Any]]]:
    """NVIDIA GPU and NVSwitch PCI functions from /sys/bus/pci (what is plugged in, whatever the driver says)."""
    devices_dir = os.path.join(root or ROOT, "sys/bus/pci/devices")
    if not os.path.isdir(devices_dir):
        raise ProbeAbsent("%s does not exist" % devices_dir)
    try:
        return scan_nvidia_functions(devices_dir)
    except OSError as exc:
        raise ProbeError("cannot read %s: %s" % (devices_dir, exc)) from None


_MODULE_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")


def parse_proc_driver_version(text: Optional[str]) -> Optional[str]:
    """The version in /proc/driver/nvidia/version ('NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  ...')."""
    match = _MODULE_VERSION.search(text or "")
    return match.group(1) if match else None


def probe_kernel_module(options: Options, root: Optional[str] = None) -> dict[str, Any]:
    """The loaded nvidia kernel module's version; ProbeAbsent when the module is not loaded."""
    base = root or ROOT
    proc = os.path.join(base, "proc/driver/nvidia/version")
    sys_version = os.path.join(base, "sys/module/nvidia/version")
    if os.path.exists(proc):
        text = files.read_text(proc)
        version = parse_proc_driver_version(text)
        if version is None:
            raise ProbeError("%s: no version in %r" % (proc, _first_line(text)))
        return {"version": version, "source": proc, "open_module": "Open Kernel Module" in text}
    if os.path.exists(sys_version):
        return {"version": files.read_text(sys_version).strip(), "source": sys_version, "open_module": None}
    raise ProbeAbsent("the nvidia kernel module is not loaded (no %s)" % proc)


# journalctl answers rc 0 with these when it cannot show the kernel log: fall back to dmesg.
_JOURNAL_UNUSABLE = ("No journal files were found", "No journal files were opened",
                     "not seeing messages from other users and the system")
_DMESG_RESTRICTED = ("kernel.dmesg_restrict=1 hides the kernel log from unprivileged users: run doctor with "
                     "become: true (or as a member of the adm/systemd-journal group, which lets journalctl read it)")


def _journal(hours: int, timeout: float) -> tuple[Optional[str], Optional[str]]:
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


def _left(deadline: float, total: float, journal_problem: Optional[str]) -> float:
    """Seconds left of the one kernel-log deadline; ProbeError when journalctl (or a first dmesg) used it all."""
    left = deadline - time.monotonic()
    if left <= 0.05:
        raise ProbeError("kernel log: the %ss deadline (timeouts.kernel_log) ran out before dmesg could run; journalctl: %s"
                         % (total, journal_problem or "used the time"))
    return left


def _dmesg(deadline: float, total: float, journal_problem: Optional[str] = None) -> tuple[str, bool]:
    """The kernel ring buffer within what is left of the kernel-log deadline, (text, has ISO timestamps)."""
    binary = command.find_binary("dmesg")
    if not binary:
        raise ProbeAbsent("neither a usable journalctl nor dmesg found")
    rc, out, err = command.run([binary, "--time-format", "iso"], _left(deadline, total, journal_problem))
    timestamped = True
    if rc != 0 and ("unrecognized option" in err or "invalid option" in err or "unknown option" in err):
        # busybox dmesg: no wall-clock timestamps, the whole buffer since boot.
        rc, out, err = command.run([binary], _left(deadline, total, journal_problem))
        timestamped = False
    if rc != 0:
        if "Operation not permitted" in err or "Permission denied" in err:
            raise ProbeError("dmesg: %s; %s" % (_first_line(err), _DMESG_RESTRICTED))
        raise ProbeError("dmesg exited with rc %s: %s" % (rc, _first_line(err, out)))
    return out, timestamped


def read_kernel_log(options: Options, now: Optional[datetime.datetime] = None) -> tuple[str, Optional[datetime.datetime], dict[str, Any]]:
    """The kernel log of the XID window (options["xid_window_hours"], resolved from hydra_expect), for a vendor's scan:
    (text, cutoff, facts). journalctl reads the window itself; the dmesg fallback reads the whole boot, and
    ``cutoff`` is then when the window starts (None without dmesg timestamps). One deadline (timeouts.kernel_log)
    covers both. ``facts``: source, journal_problem, window_hours, window_applied (False for a dmesg without
    timestamps: the events span the whole boot)."""
    hours = options.get("xid_window_hours")
    hours = XID_WINDOW_HOURS if hours is None else hours
    if hours <= 0:
        raise ProbeError("expect.xid_window_hours: %r is not a positive number of hours" % hours)
    timeout = options["timeouts"]["kernel_log"]
    deadline = time.monotonic() + timeout
    text, journal_problem = _journal(hours, timeout)
    source, window_applied = "journalctl", True
    if text is None:
        text, window_applied = _dmesg(deadline, timeout, journal_problem)
        source = "dmesg"
    cutoff = None
    if source == "dmesg" and window_applied:
        cutoff = (now or datetime.datetime.now(datetime.timezone.utc)) - datetime.timedelta(hours=hours)
    return text, cutoff, {"source": source, "journal_problem": journal_problem, "window_hours": hours, "window_applied": window_applied}


def probe_kernel_log(options: Options, now: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """The NVIDIA lines of the kernel log within the XID window (read_kernel_log).

    Xids counted per (address, code), GPU losses without an Xid, NVSwitch SXids and the address -> UUID map
    (xid.scan), not the log itself; each Xid count also within each window of hydra_expect.xid_policy
    (options["xid_policy_windows"], resolved by doctor's run).
    """
    text, cutoff, facts = read_kernel_log(options, now)
    return dict(xid.scan(text, cutoff, options.get("xid_policy_windows") or (), now), **facts)


def probe_nvlink(options: Options) -> dict[str, Any]:
    """NVLink state per GPU and link: NVML when it initialises, else ``nvidia-smi nvlink --status``.

    When ``nvidia-smi -q -x`` already failed in this run (options["envelopes"], set by catalogue.collect) nothing
    is called: a hung or broken driver must cost one timeout, not two.
    """
    earlier = (options.get("envelopes") or {}).get("nvidia_smi")
    if earlier is not None and earlier["status"] == READ_FAILED:
        raise ProbeError("not read: nvidia-smi failed earlier in this run (%s)" % earlier["reason"])
    gpus, source = None, None
    bad = BadLines()
    try:
        available, value = _nvml_session(options, nvml.nvlinks)
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
        gpus, source = parse_nvlink_status(out, bad), "nvidia-smi"
    if not any(gpu["links"] for gpu in gpus):
        if bad:
            # Lines that could not be read may be the links: not an absence.
            raise ProbeError("nvidia-smi nvlink --status: no link read, %s" % describe(bad.as_dict()))
        raise ProbeAbsent("no GPU on this host has NVLink")
    return {"source": source, "gpus": gpus, "bad_lines": bad.as_dict()}


def probe_fabric_manager(options: Options, root: Optional[str] = None) -> dict[str, Any]:
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
            "active_state": state, "log": _fabric_manager_log(options)}


def _fabric_manager_log(options: Options, now: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """The [ERROR] entries of the Fabric Manager log (option fabric_manager_log) within the XID window.

    A missing log is not an error (Fabric Manager may log to the journal only): status absent.
    """
    path = options.get("fabric_manager_log") or FABRIC_MANAGER_LOG
    hours = options.get("xid_window_hours") or XID_WINDOW_HOURS
    empty: dict[str, Any] = {"path": path, "status": READ_ABSENT, "reason": None, "nvswitch_errors": [], "errors": [],
                             "errors_total": 0}
    try:
        text = files.read_text_if_exists(path, options["timeouts"]["command"])
    except (ProbeError, ProbeAbsent) as exc:
        return dict(empty, status=READ_FAILED, reason=str(exc))
    if text is None:
        return dict(empty, reason="%s does not exist" % path)
    # The log's clock is the host's local time, without a zone.
    cutoff = (now or datetime.datetime.now()) - datetime.timedelta(hours=hours)
    return dict(xid.scan_fabric_manager_log(text[-FABRIC_MANAGER_LOG_TAIL:], cutoff), path=path, status=READ_OK, reason=None)
