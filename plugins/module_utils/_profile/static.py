# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""profile's static profile: CPU, memory, storage, OS, runtime, GPUs, network, read once before any benchmark.

It reads /proc and /sys (under ``root``, so tests lay out a fake tree) through _host, the GPUs through
``nvidia-smi -q -x`` and the GPU/NIC/CPU topology through ``nvidia-smi topo -m``; on a host without nvidia-smi,
the AMD GPUs through ``amd-smi`` (else ``rocm-smi``), with no topology (``nvidia-smi topo -m`` is NVIDIA's; a
note says so); what cannot be read becomes a note, never an error. The result keeps continuum-hydra's profile JSON shape.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import glob
import importlib
import os
import platform
import re
import sys
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._host import command as _command
from ansible_collections.continuum.hydra.plugins.module_utils._host import gpus, procfs
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import topology as _topology
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import find_nvidia_smi, read_gpus
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import membench
from ansible_collections.continuum.hydra.plugins.module_utils._host.network import read_infiniband_ports
from ansible_collections.continuum.hydra.plugins.module_utils._host.runtime import detect_container
from ansible_collections.continuum.hydra.plugins.module_utils._profile import verdict as _host_analysis
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import cpu as cpu_bench
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_ABSENT, READ_FAILED, READ_OK

ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2", "bf16", "i8mm")
NETWORK_FILE_SYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "wekafs")
MAX_MOUNTS = 50

Notes = list[str]
# A GPU reader: options -> the nvidia-smi inventory (_host.gpus.nvidia_smi.read_gpus's shape); tests replace it.
GpuReader = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def _read(root: str, path: str) -> Optional[str]:
    """A file under root, None when it cannot be read: the static profile notes what is missing, never fails."""
    return read_text_or_none(os.path.join(root, path.lstrip("/")))


def _kib(values: Mapping[str, int], key: str) -> Optional[int]:
    return values[key] * 1024 if key in values else None


def cpu_profile(root: str, notes: Notes) -> dict[str, Any]:
    info = procfs.parse_cpuinfo(_read(root, "/proc/cpuinfo"))
    model = info["model"] or info["machine_model"]
    packages, cores = set(), set()
    cpu_dirs = glob.glob(os.path.join(root, "sys/devices/system/cpu/cpu[0-9]*"))
    for cpu_dir in cpu_dirs:
        package = _read(cpu_dir, "topology/physical_package_id")
        core = _read(cpu_dir, "topology/core_id")
        if package is not None and core is not None:
            packages.add(package.strip())
            cores.add((package.strip(), core.strip()))
    try:
        online = procfs.parse_cpulist(_read(root, "/sys/devices/system/cpu/online") or "")
    except _command.ProbeError as exc:
        notes.append("/sys/devices/system/cpu/online: %s" % exc)
        online = []
    logical = len(online) or len(cpu_dirs) or None
    governors = sorted(set(text.strip() for text in (
        _read(cpu_dir, "cpufreq/scaling_governor") for cpu_dir in cpu_dirs) if text))
    if not governors:
        notes.append("no cpufreq scaling governor readable (a VM, or clocks managed by firmware)")
    if not model:
        notes.append("CPU model not found in /proc/cpuinfo")
    numa = sorted(glob.glob(os.path.join(root, "sys/devices/system/node/node[0-9]*")))
    return {
        "model": model,
        "vendor": info["vendor"],
        "arch": platform.machine() or None,
        "sockets": len(packages) or None,
        "cores_physical": len(cores) or None,
        "cores_logical": logical,
        "threads_per_core": (logical // len(cores)) if logical and cores else None,
        "usable_cpus": cpu_bench.usable_cpus(),
        "numa_nodes": len(numa) or None,
        "governors": governors,
        "isa": [flag for flag in ISA_FLAGS if flag in info["flags"]],
        "llc_bytes": membench.last_level_cache_bytes(root),
    }


def memory_profile(root: str, notes: Notes) -> dict[str, Any]:
    info = procfs.parse_meminfo(_read(root, "/proc/meminfo"))
    if not info:
        notes.append("/proc/meminfo unreadable")
    thp = _read(root, "/sys/kernel/mm/transparent_hugepage/enabled")
    thp_match = re.search(r"\[(\w+)\]", thp) if thp else None
    thp_mode = thp_match.group(1) if thp_match else None
    nodes = []
    for node_dir in sorted(glob.glob(os.path.join(root, "sys/devices/system/node/node[0-9]*")),
                           key=lambda path: int(re.sub(r"\D", "", os.path.basename(path)))):
        node_info = procfs.parse_meminfo(_read(node_dir, "meminfo"))
        nodes.append({"node": int(os.path.basename(node_dir)[4:]), "total_bytes": _kib(node_info, "MemTotal"),
                      "free_bytes": _kib(node_info, "MemFree"), "cpus": (_read(node_dir, "cpulist") or "").strip() or None})
    return {
        "total_bytes": _kib(info, "MemTotal"),
        "available_bytes": _kib(info, "MemAvailable"),
        "hugepages": {"total": info.get("HugePages_Total"), "free": info.get("HugePages_Free"),
                      "size_bytes": _kib(info, "Hugepagesize"), "transparent": thp_mode},
        "numa": nodes,
    }


def parse_mounts(text: Optional[str]) -> list[dict[str, Any]]:
    """/proc/mounts -> [{device, mount, fs_type}]: _host's parser, in the profile's shape.

    Raises ProbeError naming a line that is not in the kernel's format.
    """
    # The source field is octal-escaped like the mount point (an NFS export path with a space).
    return [{"device": procfs.unescape_mount_field(mount["source"]), "mount": mount["mount_point"], "fs_type": mount["fstype"]}
            for mount in procfs.parse_proc_mounts(text or "")]


def read_mounts(root: str, notes: Notes) -> list[dict[str, Any]]:
    """The mounts of /proc/mounts under root; [] (and a note) when it cannot be parsed."""
    try:
        return parse_mounts(_read(root, "/proc/mounts"))
    except _command.ProbeError as exc:
        notes.append(str(exc))
        return []


def mount_for(path: str, mounts: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The mount holding path (longest mount point prefix), None when none matches."""
    path = os.path.abspath(path)
    best = None
    for mount in mounts:
        point = mount["mount"]
        if path == point or path.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) >= len(best["mount"]):
                best = mount
    return best


def block_device_rotational(root: str, device: Optional[str]) -> Optional[bool]:
    """True / False from the device's queue/rotational (a partition reads its parent's), None when unknown."""
    if not device or not device.startswith("/dev/"):
        return None
    # /dev/mapper/x -> /dev/dm-0 (only meaningful on the live root); /sys/class/block/<part> links into its disk's dir.
    name = os.path.basename(os.path.realpath(device) if root == "/" else device)
    sys_path = os.path.realpath(os.path.join(root, "sys/class/block", name))
    for candidate in (sys_path, os.path.dirname(sys_path)):
        value = _read(candidate, "queue/rotational")
        if value is not None:
            return value.strip() == "1"
    return None


def describe_mount(root: str, mount: Mapping[str, Any], timeout: float = _command.DEFAULT_COMMAND_TIMEOUT) -> dict[str, Any]:
    out = dict(mount)
    out["rotational"] = block_device_rotational(root, mount["device"])
    out["is_nvme"] = "nvme" in mount["device"]
    path = os.path.join(root, mount["mount"].lstrip("/"))
    try:
        stat = _command.call_with_timeout(lambda: os.statvfs(path), timeout, "statvfs(%s)" % mount["mount"])
        out["total_bytes"] = stat.f_blocks * stat.f_frsize
        out["free_bytes"] = stat.f_bavail * stat.f_frsize
    except (OSError, _command.ProbeError):
        out["total_bytes"] = out["free_bytes"] = None
    return out


def _is_directory(path: str, timeout: float, notes: Notes) -> bool:
    # A hung network mount (NFS, Lustre, GPFS) blocks stat calls for ever: bound each one, note the hang.
    try:
        return _command.call_with_timeout(lambda: os.path.isdir(path), timeout, "stat(%s)" % path)
    except _command.ProbeError as exc:
        notes.append("%s (a hung network mount?)" % exc)
        return False


def storage_profile(root: str, notes: Notes, timeout: float = _command.DEFAULT_COMMAND_TIMEOUT) -> dict[str, Any]:
    mounts = read_mounts(root, notes)
    if not mounts:
        notes.append("/proc/mounts unreadable: no storage profile")
    kept = [m for m in mounts if m["mount"] == "/" or m["device"].startswith("/dev/") or m["fs_type"] in NETWORK_FILE_SYSTEMS]
    # Containers bind-mount single files (/etc/hosts) from the host disk: only directories are storage.
    kept = [m for m in kept if _is_directory(os.path.join(root, m["mount"].lstrip("/")), timeout, notes)]
    described = [describe_mount(root, mount, timeout) for mount in kept[:MAX_MOUNTS]]
    rootfs = mount_for("/", mounts) or {}
    root_described = next((m for m in described if m["mount"] == rootfs.get("mount")), None) or {}
    storage_notes = []
    if root_described and root_described.get("rotational") is None:
        storage_notes.append("rotational flag of %s unknown" % root_described.get("device"))
    return {
        "root_mount": rootfs.get("mount"),
        "root_device": rootfs.get("device"),
        "filesystem_type": rootfs.get("fs_type"),
        "is_nvme": root_described.get("is_nvme"),
        "is_ssd": None if root_described.get("rotational") is None else not root_described["rotational"],
        "mounts": described,
        "notes": storage_notes,
    }


def os_profile(root: str, notes: Notes) -> dict[str, Any]:
    release = procfs.parse_os_release(_read(root, "/etc/os-release"))
    if not release:
        notes.append("/etc/os-release unreadable")
    vendor = (_read(root, "/sys/class/dmi/id/sys_vendor") or "").strip() or None
    product = (_read(root, "/sys/class/dmi/id/product_name") or "").strip() or None
    kernel = platform.release()
    return {
        "name": release.get("PRETTY_NAME") or platform.system(),
        "version": release.get("VERSION_ID") or release.get("VERSION"),
        "kernel": kernel,
        "container": detect_container(_read(root, "/proc/1/cgroup"), root=root),
        "vm": procfs.parse_cpuinfo(_read(root, "/proc/cpuinfo"))["hypervisor"],
        "hypervisor_hint": " ".join(part for part in (vendor, product) if part) or None,
        "wsl": "microsoft" in kernel.lower(),
    }


def _module_version(name: str) -> Optional[str]:
    try:
        return getattr(importlib.import_module(name), "__version__", None)
    except ImportError:
        return None


def runtime_profile(inventory: Optional[Mapping[str, Any]], notes: Notes) -> dict[str, Any]:
    numpy_version = _module_version("numpy")
    if numpy_version is None:
        notes.append("NumPy is not installed: cpu and memory benchmarks use labelled stdlib fallbacks")
    if inventory is None or inventory.get("status") == READ_ABSENT:
        notes.append((inventory or {}).get("reason") or "torch is not installed: gpu benchmark skipped")
    elif inventory.get("status") == READ_FAILED:
        notes.append("torch inventory failed: %s" % inventory.get("reason"))
    ok = inventory is not None and inventory.get("status") == READ_OK
    return {
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "numpy_version": numpy_version,
        "torch_version": inventory.get("torch_version") if ok and inventory else None,
        "torch_cuda_available": inventory.get("cuda_available") if ok and inventory else None,
        "torch_cuda_version": inventory.get("cuda_version") if ok and inventory else None,
    }


def static_gpu(gpu: Mapping[str, Any]) -> dict[str, Any]:
    """The profile's view of one GPU record (_host/gpus/__init__.py's shape); AMD GPUs say so (vendor)."""
    out: dict[str, Any] = {
        "index": gpu.get("index"), "name": gpu.get("name"), "uuid": gpu.get("uuid"), "pci_bus_id": gpu.get("pci_bus_id"),
        "architecture": gpu.get("architecture"),
        "memory_total_mib": (gpu.get("memory") or {}).get("total_mib"),
        "pcie": dict((key, (gpu.get("pcie") or {}).get(key)) for key in ("gen_current", "gen_max", "width_current", "width_max")),
        "power": dict((key, (gpu.get("power") or {}).get(key)) for key in ("limit_w", "default_limit_w")),
        "max_clocks": dict((key, (gpu.get("max_clocks") or {}).get(key)) for key in ("sm_mhz", "memory_mhz")),
        "sku": (_host_analysis.find_sku(gpu.get("name")) or {}).get("id"),
    }
    if gpu.get("vendor") == "amd":
        out["vendor"] = "amd"
    return out


def parse_topology(text: Optional[str]) -> Optional[dict[str, Any]]:
    """``nvidia-smi topo -m`` -> links, affinities, NIC names, NVLink counts (_host.gpus.topology.parse_topology)."""
    return _topology.parse_topology(text)


def placement_scores(topology: Optional[Mapping[str, Any]], options: Mapping[str, Any], root: str) -> dict[str, Any]:
    """GPU -> placement score (docs/topology.md) from the matrix, /sys and this process's CPUs; {} without a matrix."""
    if not topology:
        return {}
    expect = options.get("expect") or {}
    weights = {"numa": _expect.get(expect, "placement_weight_numa"), "pcie": _expect.get(expect, "placement_weight_pcie"),
               "cpu": _expect.get(expect, "placement_weight_cpu")}
    try:
        facts = _topology.read_sys_facts(root)
    except _command.ProbeError:
        facts = {}
    return dict((gpu, _topology.placement(topology, gpu, _topology.numa_id((topology.get("numa_affinity") or {}).get(gpu)),
                                          None, facts.get("bound_cpus"), None, weights))
                for gpu in topology.get("gpus") or [])


def read_gpus_of(options: Mapping[str, Any]) -> dict[str, Any]:
    """The GPU inventory from ``nvidia-smi -q -x`` (options nvidia_smi_path and timeouts.nvidia_smi); with no
    nvidia-smi on PATH (and no nvidia_smi_path), the AMD inventory from amd-smi, else rocm-smi (vendor "amd")."""
    try:
        binary = find_nvidia_smi(options.get("nvidia_smi_path"))
    except _command.ProbeAbsent as absent:
        from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi, rocm_smi

        amd, rocm = gpus.find_rocm_tool("amd-smi"), gpus.find_rocm_tool("rocm-smi")
        if amd:
            return amd_smi.read_gpus(amd, options["timeouts"]["nvidia_smi"])
        if rocm:
            return rocm_smi.read_gpus(rocm, options["timeouts"]["nvidia_smi"])
        raise _command.ProbeAbsent("%s; amd-smi and rocm-smi not found %s either" % (absent, gpus.ROCM_TOOL_PLACES)) from None
    return read_gpus(binary, options["timeouts"]["nvidia_smi"])


def _gpu_inventory(options: Mapping[str, Any], read: GpuReader) -> tuple[Optional[Mapping[str, Any]], Optional[str]]:
    """(inventory, None), or (None, why it could not be read): a reader that fails or crashes is a note."""
    try:
        return read(options), None
    except (_command.ProbeAbsent, _command.ProbeError) as exc:
        return None, str(exc)
    except Exception as exc:  # pylint: disable=broad-exception-caught
        return None, "probe nvidia_smi crashed: %s: %s" % (type(exc).__name__, exc)


def gpu_profile(options: Mapping[str, Any], notes: Notes,
                probes: Optional[Mapping[str, GpuReader]] = None) -> tuple[list[dict[str, Any]], Optional[str], Optional[dict[str, Any]]]:
    """The GPUs, driver version and topology. ``probes`` may replace the ``nvidia_smi`` reader (tests)."""
    inventory, problem = _gpu_inventory(options, (probes or {}).get("nvidia_smi") or read_gpus_of)
    if inventory is None:
        notes.append("GPUs: %s" % problem)
        return [], None, None
    data = inventory or {}
    topology = None
    if data.get("vendor") == "amd":
        notes.append("GPU topology not read: nvidia-smi topo -m is NVIDIA's, and these GPUs are AMD (%s)" % data.get("source"))
        return [static_gpu(gpu) for gpu in data.get("gpus", [])], data.get("driver_version"), topology
    try:
        rc, out, err = _command.run([find_nvidia_smi(options.get("nvidia_smi_path")), "topo", "-m"], options["timeouts"]["nvidia_smi"])
        if rc == 0:
            topology = parse_topology(out)
            if topology is not None:
                topology["placement"] = placement_scores(topology, options, options.get("root") or "/")
        else:
            notes.append("nvidia-smi topo -m exited with rc %s: %s" % (rc, (err or out).strip().splitlines()[:1]))
    except (_command.ProbeError, _command.ProbeAbsent) as exc:
        notes.append("nvidia-smi topo -m: %s" % exc)
    return [static_gpu(gpu) for gpu in data.get("gpus", [])], data.get("driver_version"), topology


def _int_or_none(text: Optional[str]) -> Optional[int]:
    try:
        value = int((text or "").strip())
    except ValueError:
        return None
    return value if value >= 0 else None  # speed reads -1 on a link that is down


def infiniband_ports(root: str, notes: Notes) -> list[dict[str, Any]]:
    """_host's InfiniBand ports, in the profile's shape; a port tree it cannot read becomes a note."""
    try:
        found = read_infiniband_ports(root)
    except _command.ProbeAbsent:
        return []
    except _command.ProbeError as exc:
        notes.append("InfiniBand: %s" % exc)
        return []
    keys = ("device", "port", "rate_gbps", "rate", "state", "link_layer")
    # _host reads an empty file as ""; the profile has always said None.
    return [dict((key, None if port[key] == "" else port[key]) for key in keys) for port in found]


def network_profile(root: str, notes: Notes) -> dict[str, Any]:
    nics = []
    for net_dir in sorted(glob.glob(os.path.join(root, "sys/class/net/*"))):
        name = os.path.basename(net_dir)
        if name == "lo":
            continue
        nics.append({
            "name": name,
            "speed_mbps": _int_or_none(_read(net_dir, "speed")),
            "mtu": _int_or_none(_read(net_dir, "mtu")),
            "operstate": (_read(net_dir, "operstate") or "").strip() or None,
            "virtual": not os.path.exists(os.path.join(net_dir, "device")),
        })
    ports = infiniband_ports(root, notes)
    if not nics:
        notes.append("no network interface besides lo in /sys/class/net")
    return {"nics": nics, "infiniband": ports}


def static_profile(options: Mapping[str, Any], root: str = "/", probes: Optional[Mapping[str, GpuReader]] = None,
                   inventory: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The whole static profile; ``inventory`` is the torch inventory run.py took (None: not taken)."""
    notes: Notes = []
    gpus, driver, topology = gpu_profile(dict(options, root=root), notes, probes)
    profile = {
        "cpu": cpu_profile(root, notes),
        "memory": memory_profile(root, notes),
        "storage": storage_profile(root, notes, options["timeouts"]["command"]),
        "os": os_profile(root, notes),
        "runtime": runtime_profile(inventory, notes),
        "gpus": gpus,
        "gpu_driver_version": driver,
        "gpu_topology": topology,
        "network": network_profile(root, notes),
        "notes": notes,
    }
    return profile
