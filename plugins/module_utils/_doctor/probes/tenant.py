# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What check tenant.slo judges: the tenants' metric files, the co-located processes' I/O rates and GPU use, the
previous tenant state (_doctor/tenants.py).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import functools
import json
import os
import re
import time
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import tenants
from ansible_collections.continuum.hydra.plugins.module_utils._host import processes
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import DEFAULT_COMMAND_TIMEOUT, ProbeAbsent, ProbeError, call_with_timeout
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import list_dir, read_text_if_exists, read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import compute_apps
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import find_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_OK

DEFAULT_METRICS_DIR = "/var/run/tenant_metrics"
DEFAULT_IO_SAMPLE_S = 1.0
# Whole disks only: io.max and v1 throttles take a disk, not a partition; these hold no tenant's data.
_NOT_DISKS = ("loop", "ram", "zram", "nbd", "sr", "fd", "md")


def probe_tenants(options: Mapping[str, Any]) -> dict[str, Any]:
    """{metrics_dir, tenants, stale, garbage, processes, gpu_source, gpu_reason, io_sample_s, devices, state_path,
    previous, state_problem, now}; ProbeAbsent when the metrics directory does not exist (no tenants here)."""
    timeouts = options.get("timeouts") or {}
    timeout = timeouts.get("command", DEFAULT_COMMAND_TIMEOUT)
    directory = options.get("tenant_metrics_dir") or DEFAULT_METRICS_DIR
    if not call_with_timeout(lambda: os.path.isdir(directory), timeout, "stat(%s)" % directory):
        raise ProbeAbsent("%s does not exist (no tenant writes metrics on this host)" % directory)
    found, stale, garbage = read_metrics(directory, timeout)
    sample_s = max(0.05, min(float(options.get("tenant_io_sample_s") or DEFAULT_IO_SAMPLE_S), timeout))
    first = _io_snapshot()
    start = time.monotonic()
    time.sleep(sample_s)
    second = _io_snapshot()
    rates = tenants.io_rates(_readable(first), _readable(second), time.monotonic() - start)
    bad = BadLines()
    gpu_use, gpu_source, gpu_reason = _gpu_use(options, timeouts, bad)
    interesting = set(p for p, r in rates.items() if r["io_bps"] > 0) | set(gpu_use) | set(t["pid"] for t in found)
    interesting.discard(os.getpid())
    table = []
    for pid in sorted(interesting):
        facts = describe(pid)
        if facts is None:
            continue
        rate: dict[str, Optional[float]] = {"read_bps": None, "write_bps": None, "io_bps": None}
        rate.update(rates.get(pid) or {})
        gpu = gpu_use.get(pid) or {}
        table.append(dict(facts, gpu_memory_mib=gpu.get("mib"), gpu_uuids=gpu.get("gpu_uuids") or [], **rate))
    unreadable_io = sum(1 for pid in second if second[pid] is None)
    state_path = os.path.join(options.get("state_dir") or tenants.DEFAULT_STATE_DIR, tenants.STATE_FILE)
    previous, state_problem = _previous_state(state_path, timeout)
    return {"metrics_dir": directory, "tenants": found, "stale": stale, "garbage": garbage, "processes": table,
            "io_unreadable": unreadable_io, "gpu_source": gpu_source, "gpu_reason": gpu_reason, "io_sample_s": sample_s,
            "devices": device_numbers(options.get("tenant_io_devices")) or whole_disks(), "state_path": state_path,
            "previous": previous, "state_problem": state_problem, "now": time.time(), "bad_lines": bad.as_dict()}


def read_metrics(directory: str, timeout: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(tenants, stale, garbage): every ``*.metric`` file read with a deadline; none of them raises."""
    found: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    garbage: list[dict[str, Any]] = []
    boot = processes.boot_time()
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for name in list_dir(directory, timeout):
        if not name.endswith(tenants.METRIC_SUFFIX):
            continue
        path = os.path.join(directory, name)
        pid = tenants.metric_pid(name)
        if pid is None:
            garbage.append({"file": path, "reason": "the name is not <PID>%s" % tenants.METRIC_SUFFIX})
            continue
        try:
            text, mtime = call_with_timeout(functools.partial(_read_small, path), timeout, "read(%s)" % path)
            p99 = tenants.parse_metric(text)
        except (ProbeError, tenants.MetricError) as exc:
            garbage.append({"file": path, "pid": pid, "reason": str(exc)})
            continue
        starttime = processes.stat_starttime(pid)
        if starttime is None:
            stale.append({"file": path, "pid": pid, "reason": "no process %d (the tenant has exited)" % pid})
            continue
        started = boot + starttime / float(ticks) if boot is not None else None
        if started is not None and mtime < started - 1.0:
            stale.append({"file": path, "pid": pid, "reason": "written before process %d started (the PID was reused)" % pid})
            continue
        found.append(dict(describe(pid) or {"pid": pid}, key=tenants.tenant_key(pid, starttime), starttime=starttime,
                          p99_ms=p99, file=path, written_at=mtime))
    return found, stale, garbage


def _read_small(path: str) -> tuple[str, float]:
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            data = handle.read(tenants.METRIC_MAX_BYTES + 1)
    except OSError as exc:
        raise ProbeError("unreadable: %s" % (exc.strerror or exc)) from None
    if len(data) > tenants.METRIC_MAX_BYTES:
        raise ProbeError("larger than %d bytes: not a metric file" % tenants.METRIC_MAX_BYTES)
    try:
        return data.decode("utf-8"), info.st_mtime
    except UnicodeDecodeError:
        raise ProbeError("not text (binary content)") from None


def describe(pid: int) -> Optional[dict[str, Any]]:
    """{pid, comm, cmdline (first 200 characters), cgroup}; None when the process is gone."""
    comm = read_text_or_none("/proc/%d/comm" % pid)
    if comm is None:
        return None
    line = processes.cmdline(pid)
    return {"pid": pid, "comm": comm.strip(), "cmdline": line[:200] if line is not None else None,
            "cgroup": primary_cgroup(processes.cgroups(pid) or {})}


def primary_cgroup(groups: Mapping[str, str]) -> Optional[str]:
    """The cgroup that governs the process's I/O: v1 blkio where mounted, else the v2 unified one."""
    for controllers, path in groups.items():
        if "blkio" in controllers.split(","):
            return path
    return groups.get("")


def _io_snapshot() -> dict[int, Optional[dict[str, int]]]:
    """{pid: /proc/<pid>/io counters, or None where not readable (another user's process without privilege)}."""
    return {int(name): processes.io_counters(int(name)) for name in os.listdir("/proc") if name.isdigit()}


def _readable(snapshot: Mapping[int, Optional[dict[str, int]]]) -> dict[int, dict[str, int]]:
    return {pid: counters for pid, counters in snapshot.items() if counters is not None}


def whole_disks(sys_block: str = "/sys/block") -> list[str]:
    """MAJ:MIN of the machine's whole disks with a size (not loop, ram, zram, nbd, optical)."""
    out: list[str] = []
    try:
        names = sorted(os.listdir(sys_block))
    except OSError:
        return out
    for name in names:
        if name.startswith(_NOT_DISKS):
            continue
        dev, size = read_text_or_none(os.path.join(sys_block, name, "dev")), read_text_or_none(os.path.join(sys_block, name, "size"))
        if dev and size and size.strip().isdigit() and int(size) > 0:
            out.append(dev.strip())
    return out


def _gpu_use(options: Mapping[str, Any], timeouts: Mapping[str, Any],
             bad: BadLines) -> tuple[dict[int, dict[str, Any]], Optional[str], Optional[str]]:
    """{pid: {mib, gpu_uuids}} from nvidia-smi's compute apps (lines it cannot read counted in ``bad``); (use,
    source, why not) and never raises."""
    smi = (options.get("envelopes") or {}).get("nvidia_smi")
    if smi is not None and smi.get("status") != READ_OK:
        return {}, None, "nvidia-smi: %s" % (smi.get("reason") or "not readable")
    try:
        binary = find_nvidia_smi(options.get("nvidia_smi_path"))
        apps = compute_apps.read_compute_apps(binary, timeouts.get("nvidia_smi", DEFAULT_COMMAND_TIMEOUT), bad)
    except (ProbeAbsent, ProbeError) as exc:
        return {}, None, str(exc)
    use: dict[int, dict[str, Any]] = {}
    for app in apps:
        entry = use.setdefault(app["pid"], {"mib": 0, "gpu_uuids": []})
        entry["mib"] += app["used_memory_mib"] or 0
        if app["gpu_uuid"] and app["gpu_uuid"] not in entry["gpu_uuids"]:
            entry["gpu_uuids"].append(app["gpu_uuid"])
    return use, "nvidia-smi", None


def device_numbers(devices: Any) -> list[str]:
    """MAJ:MIN for each of hydra_expect.tenant_io_devices (MAJ:MIN or a block device path); a bad one is ProbeError."""
    out = []
    for device in devices or []:
        text = str(device)
        if re.match(r"^\d+:\d+$", text):
            out.append(text)
            continue
        try:
            rdev = os.stat(text).st_rdev
        except OSError:
            raise ProbeError("tenant_io_devices: %r is neither MAJ:MIN nor an existing block device" % text) from None
        out.append("%d:%d" % (os.major(rdev), os.minor(rdev)))
    return out


def _previous_state(path: str, timeout: float) -> tuple[Any, Optional[str]]:
    try:
        text = read_text_if_exists(path, timeout)
    except ProbeError as exc:
        return None, str(exc)
    if text is None:
        return None, None
    try:
        return json.loads(text), None
    except ValueError as exc:
        return {"unparsable": True}, "%s: not JSON (%s)" % (path, exc)
