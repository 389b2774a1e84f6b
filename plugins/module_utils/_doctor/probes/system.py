# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The operating system around the GPUs: /dev/shm, cgroups, EDAC, NUMA, disks, clock, InfiniBand.

Every probe that reads /proc or /sys takes ``root`` (default "/") so tests can point it at a
tree laid out under a temporary directory. Parsers are pure functions of file contents.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import functools
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.cgroupfs import read_limit
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import (
    DEFAULT_COMMAND_TIMEOUT,
    ProbeAbsent,
    ProbeError,
    call_with_timeout,
    find_binary,
    run,
)
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import list_dir, read_int, read_required_text, read_text, read_text_if_exists
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLine, BadLines, parse_lines
from ansible_collections.continuum.hydra.plugins.module_utils._host.network import read_infiniband_ports
from ansible_collections.continuum.hydra.plugins.module_utils._host.procfs import node_memtotal_kib, parse_cpulist, parse_mountinfo, parse_proc_mounts

Options = Mapping[str, Any]

DEFAULT_DISK_PATHS = ["/", "/tmp"]

_V1_CONTROLLERS = frozenset(("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "net_prio",
                             "blkio", "perf_event", "hugetlb", "pids", "rdma", "misc"))

# The kernel's NTP maximum error saturates at 16 s (NTP_PHASE_LIMIT) while unsynchronised; systemd's
# NTPSynchronized is "maxerror below that" (it ignores STA_UNSYNC, which some daemons set on purpose).
_NTP_MAXERROR_LIMIT_US = 16000000
_STA_UNSYNC = 0x0040


def _join(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _read_str(path: str) -> Optional[str]:
    """A one-value sysfs file, stripped; None when missing, ProbeError when unreadable."""
    text = read_text_if_exists(path)
    return text.strip() if text is not None else None


def _numbered(directory: str, prefix: str) -> list[str]:
    """Entries named prefix<N> in a directory, in numeric order."""
    found = []
    for name in list_dir(directory):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            found.append((int(name[len(prefix):]), name))
    return [name for number, name in sorted(found)]


# ---------------------------------------------------------------- /dev/shm

def _command_timeout(options: Options) -> float:
    return float((options.get("timeouts") or {}).get("command", DEFAULT_COMMAND_TIMEOUT))


def probe_dev_shm(options: Options, path: str = "/dev/shm", statvfs: Callable[[str], Any] = os.statvfs) -> dict[str, Any]:
    """Size and free space of /dev/shm (NCCL's SHM transport and DataLoader workers live there).

    The stat and statvfs calls are bounded by ``timeouts.command``: /dev/shm can be a bind mount of anything.
    """
    timeout = _command_timeout(options)
    if not call_with_timeout(functools.partial(os.path.isdir, path), timeout, "stat(%s)" % path):
        return {"path": path, "exists": False}
    try:
        st = call_with_timeout(functools.partial(statvfs, path), timeout, "statvfs(%s)" % path)
    except OSError as exc:
        raise ProbeError("statvfs(%s): %s" % (path, exc.strerror or exc)) from None
    return {"path": path, "exists": True, "size_bytes": st.f_blocks * st.f_frsize,
            "free_bytes": st.f_bavail * st.f_frsize}


# ---------------------------------------------------------------- cgroups

def _cgroup_line(line: str) -> Optional[list[str]]:
    if not line.strip():
        return None
    parts = line.split(":", 2)
    if len(parts) != 3:
        raise BadLine("not hierarchy:controllers:path")
    return parts


def parse_proc_cgroup(text: str, bad: Optional[BadLines] = None) -> dict[str, Any]:
    """/proc/self/cgroup -> {"v2": path or None, "v1": {controller: path}}; a line that is not hierarchy:controllers:path
    is counted in ``bad`` and skipped (ProbeError naming it when no ``bad`` is given)."""
    result: dict[str, Any] = {"v2": None, "v1": {}}
    strict = bad is None
    bad = BadLines() if bad is None else bad
    for _number, _line, (hierarchy, controllers, path) in parse_lines(text, _cgroup_line, bad, source="/proc/self/cgroup"):
        if hierarchy == "0" and controllers == "":
            result["v2"] = path
        for controller in controllers.split(","):
            if controller and not controller.startswith("name="):
                result["v1"][controller] = path
    if strict and bad:
        first = bad.sample[0]
        raise ProbeError("/proc/self/cgroup line %d is not hierarchy:controllers:path: %r" % (first["line"], first["text"]))
    return result


def cgroup_dir(mount: Mapping[str, Any], cgroup_path: str) -> str:
    """The directory of this process's cgroup under a cgroup mount.

    In a cgroup namespace (containers) the mount's root is the container's own cgroup and
    /proc/self/cgroup paths are relative to it; on the host the mount root is "/".
    """
    root = mount["root"].rstrip("/")
    relative = cgroup_path[len(root):] if root and cgroup_path.startswith(root + "/") else cgroup_path
    candidate = os.path.join(mount["mount_point"], relative.lstrip("/"))
    return candidate if os.path.isdir(candidate) else mount["mount_point"]


def _ancestors(directory: str, top: str) -> list[str]:
    """directory, its parent, ... up to and including top."""
    directory, top = os.path.normpath(directory), os.path.normpath(top)
    chain = [directory]
    while directory != top and directory.startswith(top + "/"):
        directory = os.path.dirname(directory)
        chain.append(directory)
    return chain


def _v2_memory(directory: str) -> Optional[int]:
    """memory.max: "max" -> None, else bytes."""
    return read_limit(os.path.join(directory, "memory.max"))


def _v2_cpu(directory: str) -> Optional[float]:
    """cpu.max "QUOTA PERIOD" -> CPUs (quota/period), None for "max PERIOD"."""
    path = os.path.join(directory, "cpu.max")
    text = read_text_if_exists(path)
    if text is None:
        return None
    text = text.strip()
    fields = text.split()
    if len(fields) == 2 and fields[0] == "max" and fields[1].isdigit():
        return None
    if len(fields) != 2 or not (fields[0].isdigit() and fields[1].isdigit()) or int(fields[1]) == 0:
        raise ProbeError("%s: %r is not 'QUOTA PERIOD' or 'max PERIOD'" % (path, text[:80]))
    return int(fields[0]) / float(fields[1])


def _v1_memory(directory: str) -> Optional[int]:
    return read_limit(os.path.join(directory, "memory.limit_in_bytes"))


def _v1_cpu(directory: str) -> Optional[float]:
    quota = read_int(os.path.join(directory, "cpu.cfs_quota_us"), optional=True)
    period = read_int(os.path.join(directory, "cpu.cfs_period_us"), optional=True)
    if quota is None or quota < 0 or not period:
        return None
    return quota / float(period)


# controller -> hierarchy -> (the file that limits it, its reader taking a cgroup directory)
_LIMITS: dict[str, dict[str, tuple[str, Callable[[str], Any]]]] = {
    "memory": {"v1": ("memory.limit_in_bytes", _v1_memory), "v2": ("memory.max", _v2_memory)},
    "cpu": {"v1": ("cpu.cfs_quota_us", _v1_cpu), "v2": ("cpu.max", _v2_cpu)},
}


def _strictest(directories: list[str], read_one: Callable[[str], Any]) -> tuple[Any, Optional[str]]:
    """The smallest limit along the cgroup's ancestry, with the directory it came from."""
    best, where = None, None
    for directory in directories:
        value = read_one(directory)
        if value is not None and (best is None or value < best):
            best, where = value, directory
    return best, where


def probe_cgroups(options: Options, root: str = "/") -> dict[str, Any]:
    """cgroup version, controllers and the memory / CPU limits that apply to this process."""
    bad = BadLines()  # lines of /proc/self/mountinfo (or /proc/mounts) and /proc/self/cgroup that could not be read
    try:
        mounts = parse_mountinfo(read_text(_join(root, "proc/self/mountinfo")), bad)
    except ProbeAbsent:
        mounts = parse_proc_mounts(read_text(_join(root, "proc/mounts")), bad)
    membership = parse_proc_cgroup(read_text(_join(root, "proc/self/cgroup")), bad)
    v1_mounts = [m for m in mounts if m["fstype"] == "cgroup"]
    v2_mounts = [m for m in mounts if m["fstype"] == "cgroup2"]
    if not v1_mounts and not v2_mounts:
        raise ProbeAbsent("no cgroup filesystem is mounted")
    for m in v1_mounts + v2_mounts:
        m["mount_point"] = _join(root, m["mount_point"])

    v1_controllers = dict((option, m) for m in v1_mounts for option in m["super_options"] if option in _V1_CONTROLLERS)
    v2_mount = v2_mounts[-1] if v2_mounts else None
    v2_controllers: list[str] = []
    v2_dir = ""
    if v2_mount:
        v2_dir = cgroup_dir(v2_mount, membership["v2"] or "/")
        text = _read_str(os.path.join(v2_dir, "cgroup.controllers"))
        if text is None:
            text = _read_str(os.path.join(v2_mount["mount_point"], "cgroup.controllers")) or ""
        v2_controllers = text.split()

    def limit(controller: str) -> tuple[Any, Optional[str]]:
        # A controller is bound to one hierarchy: v1 where it is mounted there, else v2.
        if controller in v1_controllers:
            mount = v1_controllers[controller]
            filename, reader = _LIMITS[controller]["v1"]
            chain = _ancestors(cgroup_dir(mount, membership["v1"].get(controller, "/")), mount["mount_point"])
        elif controller in v2_controllers:
            filename, reader = _LIMITS[controller]["v2"]
            chain = _ancestors(v2_dir, v2_mount["mount_point"]) if v2_mount else []
        else:
            return None, None
        value, where = _strictest(chain, reader)
        return value, os.path.join(where, filename) if where else None

    memory, memory_file = limit("memory")
    cpus, cpu_file = limit("cpu")
    return {
        "version": "hybrid" if v1_controllers and v2_mount else "v2" if v2_mount else "v1",
        "v1_controllers": sorted(v1_controllers),
        "v2_controllers": v2_controllers,
        "controllers": sorted(set(v1_controllers) | set(v2_controllers)),
        "process_cgroup": membership["v1"].get("memory") if "memory" in v1_controllers else membership["v2"],
        "memory_limit_bytes": memory,
        "memory_limit_file": memory_file,
        "cpu_limit": round(cpus, 3) if cpus is not None else None,
        "cpu_limit_file": cpu_file,
        "bad_lines": bad.as_dict(),
    }


# ---------------------------------------------------------------- EDAC

def probe_edac(options: Options, root: str = "/") -> dict[str, Any]:
    """Corrected / uncorrected error counts of every EDAC memory controller (and DIMMs with errors)."""
    base = _join(root, "sys/devices/system/edac/mc")
    if not os.path.isdir(base):
        raise ProbeAbsent("no EDAC memory controller: %s does not exist (no EDAC driver for this platform, or a VM)" % base)
    controllers = []
    for name in _numbered(base, "mc"):
        mc = os.path.join(base, name)
        dimms = []
        for entry in list_dir(mc):
            if re.match(r"^(dimm|rank)\d+$", entry):
                dimm = os.path.join(mc, entry)
                dimms.append({"name": entry, "label": _read_str(os.path.join(dimm, "dimm_label")),
                              "location": _read_str(os.path.join(dimm, "dimm_location")),
                              "ce_count": read_int(os.path.join(dimm, "dimm_ce_count"), optional=True),
                              "ue_count": read_int(os.path.join(dimm, "dimm_ue_count"), optional=True)})
        controllers.append({
            "name": name,
            "mc_name": _read_str(os.path.join(mc, "mc_name")),
            "size_mb": read_int(os.path.join(mc, "size_mb"), optional=True),
            "ce_count": read_int(os.path.join(mc, "ce_count")),
            "ue_count": read_int(os.path.join(mc, "ue_count")),
            "ce_noinfo_count": read_int(os.path.join(mc, "ce_noinfo_count"), optional=True),
            "ue_noinfo_count": read_int(os.path.join(mc, "ue_noinfo_count"), optional=True),
            "seconds_since_reset": read_int(os.path.join(mc, "seconds_since_reset"), optional=True),
            "dimm_count": len(dimms),
            "dimms_with_errors": [d for d in dimms if d["ce_count"] or d["ue_count"]],
        })
    if not controllers:
        raise ProbeAbsent("EDAC is loaded but registers no memory controller under %s" % base)
    return {"controllers": controllers}


# ---------------------------------------------------------------- NUMA

def probe_numa(options: Options, root: str = "/") -> dict[str, Any]:
    """NUMA nodes: CPUs, memory and distances per node."""
    base = _join(root, "sys/devices/system/node")
    if not os.path.isdir(base):
        raise ProbeAbsent("no NUMA information: %s does not exist (kernel without NUMA support)" % base)
    nodes = []
    for name in _numbered(base, "node"):
        node = os.path.join(base, name)
        cpulist_path, meminfo_path = os.path.join(node, "cpulist"), os.path.join(node, "meminfo")
        cpulist = read_required_text(cpulist_path).strip()
        try:
            cpus = parse_cpulist(cpulist)
        except ProbeError as exc:
            raise ProbeError("%s: %s" % (cpulist_path, exc)) from None
        mem_kib = node_memtotal_kib(read_required_text(meminfo_path), meminfo_path)
        distances = (_read_str(os.path.join(node, "distance")) or "").split()
        nodes.append({"node": int(name[4:]), "cpu_count": len(cpus), "cpulist": cpulist,
                      "memory_total_bytes": mem_kib * 1024,
                      "distances": [int(d) for d in distances if d.isdigit()]})
    if not nodes:
        raise ProbeAbsent("no NUMA node under %s" % base)
    return {"nodes": nodes}


# ---------------------------------------------------------------- disk space

def disk_paths(paths: Optional[Sequence[Any]]) -> tuple[list[str], bool]:
    """The paths to measure: options["disk_paths"] (hydra_expect's, None when unset), or / and /tmp; one-line ProbeError for a bad value."""
    if paths is None:
        return list(DEFAULT_DISK_PATHS), False
    for path in paths:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ProbeError("expect.disk_paths: %r is not an absolute path; give a list like ['/', '/scratch']" % (path,))
    return list(paths), True


def probe_disk_space(options: Options, statvfs: Callable[[str], Any] = os.statvfs) -> dict[str, Any]:
    """Size, free space and free inodes of each disk path that exists."""
    paths, explicit = disk_paths(options.get("disk_paths"))
    timeout = _command_timeout(options)
    measured, missing = [], []
    for path in paths:
        # A hung network mount (NFS, Lustre) blocks stat calls for ever: bound each one.
        if not call_with_timeout(functools.partial(os.path.exists, path), timeout, "stat(%s)" % path):
            missing.append(path)
            continue
        try:
            st = call_with_timeout(functools.partial(statvfs, path), timeout, "statvfs(%s)" % path)
        except OSError as exc:
            raise ProbeError("statvfs(%s): %s" % (path, exc.strerror or exc)) from None
        measured.append({"path": path, "size_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize,
                         "inodes": st.f_files, "free_inodes": st.f_favail})
    if not measured and not (explicit and missing):
        # Only the default paths are optional; a path the inventory names must exist (the check WARNs).
        raise ProbeAbsent("none of the disk paths exists: %s" % ", ".join(missing))
    return {"paths": measured, "missing": missing, "paths_explicit": explicit}


# ---------------------------------------------------------------- clock synchronisation

def _chrony_field(line: str) -> Optional[tuple[str, Any]]:
    """One ``Name : value`` line of chronyc tracking; System time and Stratum read as numbers (BadLine if not)."""
    key, sep, value = line.partition(":")
    if not sep:
        return None
    key, value = key.strip(), value.strip()
    if key == "System time":
        match = re.match(r"^(\d+(?:\.\d+)?) seconds (fast|slow) of NTP time", value)
        offset = float(match.group(1)) if match else None
        if offset is None or not math.isfinite(offset):
            raise BadLine("System time: %r is not '<seconds> seconds fast|slow of NTP time'" % value[:60])
        return key, offset * (1 if match and match.group(2) == "fast" else -1)
    if key == "Stratum":
        if not (value.isdigit() and len(value) <= 3):
            raise BadLine("Stratum: %r is not a stratum" % value[:60])
        return key, int(value)
    return key, value


def parse_chronyc_tracking(text: str) -> Optional[dict[str, Any]]:
    """``chronyc tracking`` -> synchronised?, reference, stratum, offset (s, + = clock ahead); None if not that output.

    A line that cannot be read is skipped and counted in ``bad_lines``."""
    bad = BadLines()
    fields: dict[str, Any] = dict(item for _number, _line, item in parse_lines(text, _chrony_field, bad))
    leap = fields.get("Leap status")
    if leap is None:
        return None
    return {"synchronized": leap != "Not synchronised" and not str(fields.get("Reference ID", "")).startswith("00000000"),
            "leap_status": leap, "reference": fields.get("Reference ID"), "stratum": fields.get("Stratum"),
            "offset_seconds": fields.get("System time"), "bad_lines": bad.as_dict()}


def kernel_clock_state() -> dict[str, Any]:
    """The kernel's NTP state from adjtimex(2) (what timedatectl itself reads); None if unavailable."""
    import ctypes  # pylint: disable=import-outside-toplevel

    long_, int_ = ctypes.c_long, ctypes.c_int

    class Timex(ctypes.Structure):  # struct timex of <sys/timex.h>; the tail is padded generously
        _fields_ = [("modes", ctypes.c_uint), ("offset", long_), ("freq", long_), ("maxerror", long_),
                    ("esterror", long_), ("status", int_), ("padding", ctypes.c_byte * 256)]

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        timex = Timex()
        state = libc.adjtimex(ctypes.byref(timex))
    except (OSError, AttributeError) as exc:
        return {"error": str(exc)}
    if state < 0:
        return {"error": os.strerror(ctypes.get_errno())}
    return {"maxerror_us": timex.maxerror, "esterror_us": timex.esterror, "status": timex.status, "state": state}


def parse_kernel_clock(state: Mapping[str, Any]) -> dict[str, Any]:
    return {"synchronized": state["maxerror_us"] < _NTP_MAXERROR_LIMIT_US,
            "maxerror_us": state["maxerror_us"], "esterror_us": state["esterror_us"],
            "sta_unsync": bool(state["status"] & _STA_UNSYNC)}


def _first_line(*texts: Optional[str]) -> str:
    for text in texts:
        if text and text.strip():
            return text.strip().splitlines()[0][:200]
    return "no output"


def probe_time_sync(options: Options, kernel_clock: Callable[[], Optional[Mapping[str, Any]]] = kernel_clock_state) -> dict[str, Any]:
    """Whether the clock is NTP-synchronised: timedatectl, else chronyc, else the kernel's own state."""
    timeout = options["timeouts"]["command"]
    tried: dict[str, str] = {}
    timedatectl = find_binary("timedatectl")
    if timedatectl:
        try:
            rc, out, err = run([timedatectl, "show", "-p", "NTPSynchronized", "--value"], timeout)
            if rc == 0 and out.strip() in ("yes", "no"):
                return {"source": "timedatectl", "synchronized": out.strip() == "yes", "tried": tried}
            tried["timedatectl"] = "rc %d: %s" % (rc, _first_line(err, out))
        except (ProbeAbsent, ProbeError) as exc:
            tried["timedatectl"] = str(exc)
    else:
        tried["timedatectl"] = "not installed"
    chronyc = find_binary("chronyc")
    if chronyc:
        try:
            rc, out, err = run([chronyc, "-n", "tracking"], timeout)
            parsed = parse_chronyc_tracking(out) if rc == 0 else None
            if parsed is not None:
                parsed.update({"source": "chronyc", "tried": tried})
                return parsed
            tried["chronyc"] = "rc %d: %s" % (rc, _first_line(err, out))
        except (ProbeAbsent, ProbeError) as exc:
            tried["chronyc"] = str(exc)
    else:
        tried["chronyc"] = "not installed"
    state = kernel_clock()
    if state and "error" not in state:
        data = parse_kernel_clock(state)
        data.update({"source": "kernel", "tried": tried})
        return data
    tried["kernel"] = (state or {}).get("error", "adjtimex unavailable")
    raise ProbeAbsent("no clock synchronisation source answered: %s" % "; ".join("%s: %s" % kv for kv in sorted(tried.items())))


# ---------------------------------------------------------------- InfiniBand

def probe_infiniband(options: Options, root: str = "/") -> dict[str, Any]:
    """State, physical state, rate and link layer of every RDMA port under /sys/class/infiniband."""
    return {"ports": read_infiniband_ports(root)}
