# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Checks of the operating system and the network around the GPUs.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, READ_OK, SKIP, WARN

GIB = 2.0 ** 30

DEV_SHM_MIN_GB = _expect.key("dev_shm_min_gb")
CGROUP_LIMIT_FRACTION = _expect.key("cgroup_limit_warn_fraction")
EDAC_CE_WARN = _expect.key("edac_ce_warn")
NUMA_NODES = _expect.key("numa_nodes")
DISK_MIN_FREE_GB = _expect.key("disk_min_free_gb")
IB_RATE_GBPS = _expect.key("ib_rate_gbps")
IB_DEVICES = _expect.key("ib_devices")


def gib(value: Optional[float]) -> str:
    return "%.1f GiB" % (value / GIB) if value is not None else "unknown"


# ---------------------------------------------------------------- /dev/shm

@check("system.dev_shm", "/dev/shm size", requires=("dev_shm",))
def dev_shm(probes: Probes, expect: Expect) -> Finding:
    """Reads the size and free space of /dev/shm (statvfs).

    NCCL's shared-memory transport and PyTorch DataLoader workers allocate there; Docker's default
    64 MiB makes NCCL fail with "unhandled system error" and workers die with a bus error.
    FAIL when /dev/shm is missing or smaller than a quarter of `dev_shm_min_gb` (default 1 GiB, so
    below 256 MiB); WARN when smaller than `dev_shm_min_gb`, or more than 90 % used (stale segments);
    PASS otherwise.
    Remediation: run containers with `--ipc=host` or `--shm-size=8g` (Kubernetes: an emptyDir with medium
    Memory on /dev/shm); on a host, remount /dev/shm larger.
    """
    shm = probes["dev_shm"]["data"]
    remediation = ("run containers with --ipc=host or --shm-size=8g (Kubernetes: an emptyDir with medium: Memory "
                   "mounted on /dev/shm); on a host, remount /dev/shm with a larger size")
    if not shm.get("exists"):
        return finding(FAIL, "%s does not exist" % shm.get("path"), shm, remediation=remediation)
    size, free = shm["size_bytes"], shm["free_bytes"]
    minimum = float(_expect.get(expect, DEV_SHM_MIN_GB)) * GIB
    details = dict(shm, min_bytes=int(minimum))
    if size < minimum / 4:
        return finding(FAIL, "/dev/shm is %s, far below the %s NCCL and DataLoader workers need" % (_mib(size), gib(minimum)),
                       details, remediation=remediation)
    if size < minimum:
        return finding(WARN, "/dev/shm is %s, below %s" % (_mib(size), gib(minimum)), details, remediation=remediation)
    if size and free < size * 0.1:
        return finding(WARN, "/dev/shm is %d %% used (%s free of %s): stale shared-memory segments?"
                       % (round(100 * (1 - float(free) / size)), gib(free), gib(size)), details,
                       remediation="remove stale files in /dev/shm (e.g. nccl-* and torch_* left by killed jobs)")
    return finding(PASS, "/dev/shm is %s (%s free)" % (gib(size), gib(free)), details)


def _mib(value: float) -> str:
    return "%d MiB" % round(value / 2.0 ** 20)


# ---------------------------------------------------------------- cgroups

@check("system.cgroups", "cgroup version, controllers and limits", requires=("cgroups",), uses=("host",))
def cgroups(probes: Probes, expect: Expect) -> Finding:
    """Reads the cgroup version (v1, v2 or hybrid, from /proc/self/mountinfo), the controllers available
    (v1 mount options, v2 cgroup.controllers) and the strictest memory and CPU limits on this process's
    cgroup path (v2 memory.max and cpu.max; v1 memory.limit_in_bytes and cpu.cfs_quota_us / cfs_period_us).

    WARN when the memory or cpu controller is missing (limits and accounting cannot work), or when the
    memory limit is below `cgroup_limit_warn_fraction` (default 0.5) of the host's RAM, or the CPU limit
    below that fraction of its logical CPUs (the job, not the host, is then the bottleneck); PASS otherwise.
    Remediation: raise the limit of the job's cgroup (Slurm cgroup.conf, Kubernetes resources, systemd slice) or enable the missing controller.
    """
    cg = probes["cgroups"]["data"]
    host = (probes["host"]["data"] or {}) if probes["host"]["status"] == READ_OK else {}
    fraction = float(_expect.get(expect, CGROUP_LIMIT_FRACTION))
    ram, cpus = host.get("memory_total_bytes"), host.get("logical_cpus")
    details = dict(cg, host_memory_bytes=ram, host_cpus=cpus, warn_fraction=fraction)
    problems = []
    missing = [c for c in ("memory", "cpu") if c not in cg.get("controllers", [])]
    if missing:
        problems.append("no %s controller" % " or ".join(missing))
    memory, cpu = cg.get("memory_limit_bytes"), cg.get("cpu_limit")
    if memory is not None and ram and memory < fraction * ram:
        problems.append("memory limit %s is %d %% of the host's %s (%s)" % (
            gib(memory), round(100.0 * memory / ram), gib(ram), cg.get("memory_limit_file")))
    if cpu is not None and cpus and cpu < fraction * cpus:
        problems.append("CPU limit %g of the host's %d CPUs (%s)" % (cpu, cpus, cg.get("cpu_limit_file")))
    limits = "memory %s, CPU %s" % (gib(memory) if memory is not None else "unlimited", ("%g" % cpu) if cpu is not None else "unlimited")
    summary = "cgroup %s (%s)" % (cg.get("version"), ", ".join(cg.get("controllers", [])) or "no controllers")
    if problems:
        return finding(WARN, "%s: %s" % (summary, "; ".join(problems)), details,
                       remediation="raise the limit of the job's cgroup (Slurm cgroup.conf, Kubernetes resources, systemd slice) "
                                   "or enable the missing controller")
    return finding(PASS, "%s; limits: %s" % (summary, limits), details)


# ---------------------------------------------------------------- EDAC

@check("system.memory_errors", "Host memory ECC errors (EDAC)", requires=("edac",))
def memory_errors(probes: Probes, expect: Expect) -> Finding:
    """Reads ce_count and ue_count of every EDAC memory controller (/sys/devices/system/edac/mc/mc*)
    and the DIMMs (dimm*/rank*) that have errors.

    FAIL when any controller has uncorrected errors (ue_count > 0); WARN when a controller's corrected
    errors exceed `edac_ce_warn` (default 100: a DIMM that keeps correcting is failing); PASS otherwise;
    SKIP without EDAC (VMs, platforms without an EDAC driver).
    Remediation: drain the node and replace the DIMM named (dimm_label), then reset the counters.
    """
    controllers = probes["edac"]["data"]["controllers"]
    limit = _expect.get(expect, EDAC_CE_WARN)
    details = {"controllers": controllers, "ce_warn": limit}
    ue = [c for c in controllers if c["ue_count"] > 0]
    ce = [c for c in controllers if c["ce_count"] > limit]
    remediation = "drain the node and replace the DIMM named in details (dimm_label), then reset the EDAC counters"

    def where(mcs: Iterable[Mapping[str, Any]], key: str) -> str:
        parts = []
        for mc in mcs:
            dimms = [d["label"] or d["name"] for d in mc["dimms_with_errors"] if (d.get(key) or 0) > 0]
            parts.append("%s %d%s" % (mc["name"], mc[key], (" (" + ", ".join(dimms) + ")") if dimms else ""))
        return ", ".join(parts)

    if ue:
        return finding(FAIL, "uncorrected memory errors: %s" % where(ue, "ue_count"), details, remediation=remediation)
    if ce:
        return finding(WARN, "corrected memory errors above %d: %s" % (limit, where(ce, "ce_count")), details, remediation=remediation)
    return finding(PASS, "%d memory controller(s), no uncorrected errors, %d corrected"
                   % (len(controllers), sum(c["ce_count"] for c in controllers)), details)


# ---------------------------------------------------------------- NUMA

@check("system.numa", "NUMA layout", requires=("numa",))
def numa(probes: Probes, expect: Expect) -> Finding:
    """Reads the CPUs (cpulist) and memory (meminfo MemTotal) of every node under /sys/devices/system/node.

    WARN when a node has CPUs but no memory (every allocation of its CPUs is remote), when nodes with
    CPUs are very uneven (one has less than half the memory or CPUs of the largest: a failed DIMM or
    disabled cores), or when `numa_nodes` is expected and the number of nodes with CPUs differs
    (BIOS NPS / sub-NUMA clustering setting); PASS otherwise. Memory-only nodes (GPU memory of
    Grace Hopper, CXL) are listed but not judged.
    Remediation: check the DIMM population and BIOS NUMA settings (NPS, SNC) against the fleet's standard.
    """
    nodes = probes["numa"]["data"]["nodes"]
    with_cpus = [n for n in nodes if n["cpu_count"]]
    details = {"nodes": nodes, "expected_nodes": _expect.get(expect, NUMA_NODES)}
    problems = []
    memoryless = [n["node"] for n in with_cpus if not n["memory_total_bytes"]]
    if memoryless:
        problems.append("node(s) %s have CPUs but no memory" % ", ".join(str(n) for n in memoryless))
    populated = [n for n in with_cpus if n["memory_total_bytes"]]
    if len(populated) > 1:
        most_mem = max(n["memory_total_bytes"] for n in populated)
        most_cpu = max(n["cpu_count"] for n in populated)
        for n in populated:
            if n["memory_total_bytes"] < most_mem / 2.0:
                problems.append("node %d has %s of memory, the largest %s" % (n["node"], gib(n["memory_total_bytes"]), gib(most_mem)))
            if n["cpu_count"] < most_cpu / 2.0:
                problems.append("node %d has %d CPUs, the largest %d" % (n["node"], n["cpu_count"], most_cpu))
    want = _expect.get(expect, NUMA_NODES)
    if want is not None and len(with_cpus) != want:
        problems.append("%d node(s) with CPUs, expected %d" % (len(with_cpus), want))
    layout = ", ".join("node %d: %d CPUs %s" % (n["node"], n["cpu_count"], gib(n["memory_total_bytes"])) for n in nodes)
    if problems:
        return finding(WARN, "; ".join(problems), details,
                       remediation="check the DIMM population and the BIOS NUMA settings (NPS, SNC) against the fleet's standard")
    return finding(PASS, "%d NUMA node(s): %s" % (len(nodes), layout), details)


# ---------------------------------------------------------------- disk space

@check("system.disk_space", "Free disk space", requires=("disk_space",))
def disk_space(probes: Probes, expect: Expect) -> Finding:
    """Reads free space and free inodes (statvfs, as available to non-root users) of each of
    `disk_paths` (default / and /tmp) that exists.

    FAIL when a path has less than 2 % or less than 1 GiB free, or less than 2 % of its inodes free;
    WARN when it has less than 10 % free (space or inodes), less than `disk_min_free_gb` when that is
    set, or when a path listed in `disk_paths` does not exist; PASS otherwise, naming the fullest path.
    Remediation: free space on the path named (old checkpoints, container images, caches such as ~/.cache/pip and ~/.cache/torch).
    """
    data = probes["disk_space"]["data"]
    min_free = _expect.get(expect, DISK_MIN_FREE_GB)
    failed, warned = [], []
    for entry in data["paths"]:
        size, free = entry["size_bytes"], entry["free_bytes"]
        pct = 100.0 * free / size if size else None
        inode_pct = 100.0 * entry["free_inodes"] / entry["inodes"] if entry.get("inodes") else None
        entry["free_percent"] = round(pct, 1) if pct is not None else None
        label = "%s has %s free (%s %%)" % (entry["path"], gib(free), "%.1f" % pct if pct is not None else "?")
        if (pct is not None and pct < 2) or free < GIB:
            failed.append(label)
        elif inode_pct is not None and inode_pct < 2:
            failed.append("%s has %.1f %% of its inodes free" % (entry["path"], inode_pct))
        elif pct is not None and pct < 10:
            warned.append(label)
        elif min_free is not None and free < float(min_free) * GIB:
            warned.append("%s, below %s GiB" % (label, min_free))
        elif inode_pct is not None and inode_pct < 10:
            warned.append("%s has %.1f %% of its inodes free" % (entry["path"], inode_pct))
    if data.get("paths_explicit"):
        warned.extend("%s does not exist" % path for path in data.get("missing", []))
    details = {"paths": data["paths"], "missing": data.get("missing", []), "min_free_gb": min_free}
    remediation = "free space on the path named: old checkpoints, container images, ~/.cache/pip, ~/.cache/torch"
    if failed:
        return finding(FAIL, "; ".join(failed + warned), details, remediation=remediation)
    if warned:
        return finding(WARN, "; ".join(warned), details, remediation=remediation)
    fullest = min(data["paths"], key=lambda e: e["free_percent"] if e["free_percent"] is not None else 100)
    return finding(PASS, "%d path(s) checked; fullest %s with %s free (%s %%)"
                   % (len(data["paths"]), fullest["path"], gib(fullest["free_bytes"]), fullest["free_percent"]), details)


# ---------------------------------------------------------------- clock

@check("system.time_sync", "Clock synchronised (NTP)", requires=("time_sync",))
def time_sync(probes: Probes, expect: Expect) -> Finding:
    """Reads `timedatectl show -p NTPSynchronized`, else `chronyc tracking`, else the kernel's NTP state
    (adjtimex: maximum error below 16 s, what timedatectl itself reports).

    WARN when the clock is not synchronised (log correlation across nodes breaks, and so do TLS and
    Kerberos when the drift grows); PASS otherwise; SKIP when no source can answer.
    Remediation: enable and start chronyd or systemd-timesyncd with a reachable NTP server.
    """
    data = probes["time_sync"]["data"]
    source = data["source"]
    detail = ""
    if source == "chronyc":
        detail = ", leap status %s, offset %+.6f s" % (data.get("leap_status"), data.get("offset_seconds") or 0.0)
    elif source == "kernel":
        detail = ", maximum error %.3f s" % (data["maxerror_us"] / 1e6)
    if not data["synchronized"]:
        return finding(WARN, "clock is not NTP-synchronised (%s%s)" % (source, detail), data,
                       remediation="enable and start chronyd or systemd-timesyncd with a reachable NTP server")
    return finding(PASS, "clock is NTP-synchronised (%s%s)" % (source, detail), data)


# ---------------------------------------------------------------- InfiniBand

@check("network.ib_ports", "InfiniBand / RDMA ports", requires=("infiniband",))
def ib_ports(probes: Probes, expect: Expect) -> Finding:
    """Reads state, phys_state, rate and link_layer of every port under /sys/class/infiniband
    (only the devices in `ib_devices` when set).

    With `ib_devices` set (the rails this host must have): FAIL when one of their ports is not
    ACTIVE with physical state LinkUp (a down rail stalls or slows every collective that crosses it),
    WARN when a listed device does not exist. Without it, only InfiniBand link-layer ports are judged
    (Ethernet/RoCE NICs also appear there) and a down port is a WARN: an uncabled spare port looks
    the same as a broken one, so only the inventory can make it a FAIL. WARN when an active port's
    rate is below `ib_rate_gbps`; PASS otherwise; SKIP without /sys/class/infiniband or without
    InfiniBand ports.
    Remediation: check the cable and transceiver, the switch port and the subnet manager (`ibstat`, `iblinkinfo`), then reseat or replace.
    """
    ports = probes["infiniband"]["data"]["ports"]
    wanted, min_rate = _expect.get(expect, IB_DEVICES), _expect.get(expect, IB_RATE_GBPS)
    problems_fail: list[str] = []
    problems_warn: list[str] = []
    if wanted:
        present = set(p["device"] for p in ports)
        problems_warn.extend("%s does not exist" % d for d in wanted if d not in present)
        ports = [p for p in ports if p["device"] in wanted]
    else:
        ports = [p for p in ports if (p.get("link_layer") or "InfiniBand") == "InfiniBand"]
        if not ports:
            return finding(SKIP, "no InfiniBand link-layer ports (Ethernet/RoCE only); list rails in ib_devices to judge them")
    down = problems_fail if wanted else problems_warn
    for p in ports:
        name = "%s/%s" % (p["device"], p["port"])
        if p["state"] != "ACTIVE" or p["phys_state"] != "LinkUp":
            down.append("%s is %s/%s" % (name, p["state"], p["phys_state"]))
        elif min_rate is not None and p.get("rate_gbps") is not None and p["rate_gbps"] < min_rate:
            problems_warn.append("%s runs at %g Gb/s, expected %g" % (name, p["rate_gbps"], min_rate))
    details = {"ports": ports, "expected_rate_gbps": min_rate, "devices": wanted}
    remediation = "check the cable, transceiver, switch port and subnet manager (ibstat, iblinkinfo), then reseat or replace"
    if problems_fail:
        return finding(FAIL, "%d of %d port(s) down: %s" % (len(problems_fail), len(ports), "; ".join(problems_fail + problems_warn)),
                       details, remediation=remediation)
    if problems_warn:
        return finding(WARN, "; ".join(problems_warn), details, remediation=remediation)
    rates = sorted(set(p["rate_gbps"] for p in ports if p.get("rate_gbps") is not None))
    return finding(PASS, "%d port(s) ACTIVE/LinkUp at %s" % (len(ports), ", ".join("%g Gb/s" % r for r in rates) or "unknown rate"), details)
