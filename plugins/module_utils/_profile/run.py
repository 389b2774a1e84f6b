# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""profile's run: static profile, the selected sustained benchmarks under telemetry, the verdict.

The static profile reads /proc and /sys (under ``root``, so tests lay out a
fake tree), doctor's nvidia_smi probe for the GPUs and ``nvidia-smi topo -m``
for the GPU/NIC/CPU topology; what cannot be read becomes a note, never an
error. The result keeps continuum-hydra's profile JSON shape.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import glob
import importlib
import importlib.util
import os
import platform
import re
import sys
import tempfile
import time

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import catalogue as _doctor_checks  # noqa: F401 pylint: disable=unused-import
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import host as host_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system as system_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.gpu import _nvidia_smi as nvidia_smi_binary
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.system import _unescape_mount_field
from ansible_collections.continuum.hydra.plugins.module_utils._host import command as _command
from ansible_collections.continuum.hydra.plugins.module_utils._profile import verdict as _host_analysis
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import cpu as cpu_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import disk as disk_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import gpu as gpu_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import memory as memory_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import telemetry
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.runlog import RunLog
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import FAILED, FALLBACK, OK, SKIPPED, BenchError, outcome

# The profile result's own schema (continuum-hydra's profile JSON), distinct from doctor's.
PROFILE_SCHEMA_VERSION = "1.0.0"

BENCHMARKS = ("cpu", "memory", "disk", "gpu")  # run order: host first, GPUs (the longest) last
RESULT_KEYS = {"cpu": "cpu_sustained", "memory": "memory_bandwidth", "disk": "disk_random_io", "gpu": "gpu_sustained"}
OPTION_KINDS = {
    "cpu": {"warmup_s": "number", "duration_s": "number", "matrix_n": "int", "timeout_s": "number"},
    "memory": {"warmup_s": "number", "duration_s": "number", "array_mib": "int", "threads": "int"},
    "disk": {"warmup_s": "number", "duration_s": "number", "directory": "str", "file_size_mib": "int", "timeout_s": "number"},
    "gpu": {"warmup_s": "number", "duration_s": "number", "matrix_n": "int", "transfer_mib": "int", "device_copy_mib": "int",
            "repeats": "int", "timeout_s": "number"},
}
# nvidia_smi and command come from doctor's defaults; torch stays profile's own (its inventory budget is longer than
# doctor's torch probe), and doctor's kernel_log is not a profile option.
DEFAULT_TIMEOUTS = dict([(name, _doctor.DEFAULT_TIMEOUTS[name]) for name in ("nvidia_smi", "command")], torch=120)
# Headline figures of each benchmark for benchmark_results: (key, unit).
HEADLINES = {
    "cpu_sustained": (("single_thread_gflops", "GFLOP/s"), ("all_cores_gflops", "GFLOP/s")),
    "memory_bandwidth": (("copy_gbps", "GB/s"), ("triad_gbps", "GB/s")),
    "disk_random_io": (("read_iops", "IOPS"), ("read_latency_us.p99", "us"), ("seq_read_mbps", "MB/s"), ("seq_write_mbps", "MB/s")),
    "gpu_sustained": (("bf16_tflops", "TFLOP/s"), ("fp16_tflops", "TFLOP/s"), ("fp32_tflops", "TFLOP/s"), ("h2d_gbps", "GB/s"),
                      ("d2h_gbps", "GB/s"), ("memory_bandwidth_gbps", "GB/s")),
}
STATUS_OF = {OK: "PASS", FALLBACK: "WARN", SKIPPED: "SKIP", FAILED: "ERROR"}
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2", "bf16", "i8mm")
NETWORK_FILE_SYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "wekafs")
MAX_MOUNTS = 50


class ProfileInputError(ValueError):
    """Bad options: one line naming the bad value and what is accepted."""


def _read(root, path):
    try:
        with open(os.path.join(root, path.lstrip("/"))) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


# ---------------------------------------------------------------------------------------------
# Static profile


def parse_cpuinfo(text):
    """Model, vendor, flags of the first processor block (x86 "flags", Arm "Features")."""
    model = vendor = None
    flags = []
    for line in (text or "").splitlines():
        key, _sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("model name", "Model") and model is None:
            model = value
        elif key in ("vendor_id", "CPU implementer") and vendor is None:
            vendor = value
        elif key in ("flags", "Features") and not flags:
            flags = value.split()
    return {"model": model, "vendor": vendor, "flags": flags}


def parse_meminfo(text):
    """/proc/meminfo (or a node's meminfo) -> {key: kB value}."""
    values = {}
    for line in (text or "").splitlines():
        key, _sep, rest = line.partition(":")
        parts = rest.split()
        if parts:
            try:
                values[key.split()[-1]] = int(parts[0])  # "Node 0 MemTotal" -> "MemTotal"
            except ValueError:
                continue
    return values


def _kib(values, key):
    return values[key] * 1024 if key in values else None


def cpu_profile(root, notes):
    info = parse_cpuinfo(_read(root, "/proc/cpuinfo"))
    packages, cores = set(), set()
    cpu_dirs = glob.glob(os.path.join(root, "sys/devices/system/cpu/cpu[0-9]*"))
    for cpu_dir in cpu_dirs:
        package = _read(cpu_dir, "topology/physical_package_id")
        core = _read(cpu_dir, "topology/core_id")
        if package is not None and core is not None:
            packages.add(package.strip())
            cores.add((package.strip(), core.strip()))
    try:
        online = system_probes.parse_cpulist(_read(root, "/sys/devices/system/cpu/online") or "")
    except _command.ProbeError as exc:
        notes.append("/sys/devices/system/cpu/online: %s" % exc)
        online = []
    logical = len(online) or len(cpu_dirs) or None
    governors = sorted(set(text.strip() for text in (
        _read(cpu_dir, "cpufreq/scaling_governor") for cpu_dir in cpu_dirs) if text))
    if not governors:
        notes.append("no cpufreq scaling governor readable (a VM, or clocks managed by firmware)")
    if not info["model"]:
        notes.append("CPU model not found in /proc/cpuinfo")
    numa = sorted(glob.glob(os.path.join(root, "sys/devices/system/node/node[0-9]*")))
    return {
        "model": info["model"],
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
        "llc_bytes": memory_bench.last_level_cache_bytes(root),
    }


def memory_profile(root, notes):
    info = parse_meminfo(_read(root, "/proc/meminfo"))
    if not info:
        notes.append("/proc/meminfo unreadable")
    thp = _read(root, "/sys/kernel/mm/transparent_hugepage/enabled")
    thp_mode = re.search(r"\[(\w+)\]", thp).group(1) if thp and re.search(r"\[(\w+)\]", thp) else None
    nodes = []
    for node_dir in sorted(glob.glob(os.path.join(root, "sys/devices/system/node/node[0-9]*")),
                           key=lambda path: int(re.sub(r"\D", "", os.path.basename(path)))):
        node_info = parse_meminfo(_read(node_dir, "meminfo"))
        nodes.append({"node": int(os.path.basename(node_dir)[4:]), "total_bytes": _kib(node_info, "MemTotal"),
                      "free_bytes": _kib(node_info, "MemFree"), "cpus": (_read(node_dir, "cpulist") or "").strip() or None})
    return {
        "total_bytes": _kib(info, "MemTotal"),
        "available_bytes": _kib(info, "MemAvailable"),
        "hugepages": {"total": info.get("HugePages_Total"), "free": info.get("HugePages_Free"),
                      "size_bytes": _kib(info, "Hugepagesize"), "transparent": thp_mode},
        "numa": nodes,
    }


def parse_mounts(text):
    """/proc/mounts -> [{device, mount, fs_type}]: doctor's parser, in the profile's shape.

    Raises ProbeError naming a line that is not in the kernel's format.
    """
    # The source field is octal-escaped like the mount point (an NFS export path with a space).
    return [{"device": _unescape_mount_field(mount["source"]), "mount": mount["mount_point"], "fs_type": mount["fstype"]}
            for mount in system_probes.parse_proc_mounts(text or "")]


def read_mounts(root, notes):
    """The mounts of /proc/mounts under root; [] (and a note) when it cannot be parsed."""
    try:
        return parse_mounts(_read(root, "/proc/mounts"))
    except _command.ProbeError as exc:
        notes.append(str(exc))
        return []


def mount_for(path, mounts):
    """The mount holding path (longest mount point prefix), None when none matches."""
    path = os.path.abspath(path)
    best = None
    for mount in mounts:
        point = mount["mount"]
        if path == point or path.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) >= len(best["mount"]):
                best = mount
    return best


def block_device_rotational(root, device):
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


def describe_mount(root, mount, timeout=10):
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


def _is_directory(path, timeout, notes):
    # A hung network mount (NFS, Lustre, GPFS) blocks stat calls for ever: bound each one, note the hang.
    try:
        return _command.call_with_timeout(lambda: os.path.isdir(path), timeout, "stat(%s)" % path)
    except _command.ProbeError as exc:
        notes.append("%s (a hung network mount?)" % exc)
        return False


def storage_profile(root, notes, timeout=10):
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


def os_profile(root, notes):
    release = host_probes.parse_os_release(_read(root, "/etc/os-release"))
    if not release:
        notes.append("/etc/os-release unreadable")
    vendor = (_read(root, "/sys/class/dmi/id/sys_vendor") or "").strip() or None
    product = (_read(root, "/sys/class/dmi/id/product_name") or "").strip() or None
    kernel = platform.release()
    return {
        "name": release.get("PRETTY_NAME") or platform.system(),
        "version": release.get("VERSION_ID") or release.get("VERSION"),
        "kernel": kernel,
        "container": host_probes.detect_container(_read(root, "/proc/1/cgroup"), root=root),
        "vm": host_probes.parse_cpuinfo(_read(root, "/proc/cpuinfo"))["hypervisor"],
        "hypervisor_hint": " ".join(part for part in (vendor, product) if part) or None,
        "wsl": "microsoft" in kernel.lower(),
    }


def _module_version(name):
    try:
        return getattr(importlib.import_module(name), "__version__", None)
    except ImportError:
        return None


def runtime_profile(inventory, notes):
    numpy_version = _module_version("numpy")
    if numpy_version is None:
        notes.append("NumPy is not installed: cpu and memory benchmarks use labelled stdlib fallbacks")
    if inventory is None or inventory.get("status") == "absent":
        notes.append((inventory or {}).get("reason") or "torch is not installed: gpu benchmark skipped")
    elif inventory.get("status") == "error":
        notes.append("torch inventory failed: %s" % inventory.get("reason"))
    ok = inventory is not None and inventory.get("status") == "ok"
    return {
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "numpy_version": numpy_version,
        "torch_version": inventory.get("torch_version") if ok else None,
        "torch_cuda_available": inventory.get("cuda_available") if ok else None,
        "torch_cuda_version": inventory.get("cuda_version") if ok else None,
    }


def static_gpu(gpu):
    """The profile's view of one GPU from doctor's nvidia_smi probe data."""
    return {
        "index": gpu.get("index"), "name": gpu.get("name"), "uuid": gpu.get("uuid"), "pci_bus_id": gpu.get("pci_bus_id"),
        "architecture": gpu.get("architecture"),
        "memory_total_mib": (gpu.get("memory") or {}).get("total_mib"),
        "pcie": dict((key, (gpu.get("pcie") or {}).get(key)) for key in ("gen_current", "gen_max", "width_current", "width_max")),
        "power": dict((key, (gpu.get("power") or {}).get(key)) for key in ("limit_w", "default_limit_w")),
        "max_clocks": dict((key, (gpu.get("max_clocks") or {}).get(key)) for key in ("sm_mhz", "memory_mhz")),
        "sku": (_host_analysis.find_sku(gpu.get("name")) or {}).get("id"),
    }


_TOPO_LABELS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


def parse_topology(text):
    """``nvidia-smi topo -m`` -> links between GPUs / NICs, CPU and NUMA affinity per GPU, NIC names."""
    lines = [line.rstrip("\n") for line in (text or "").splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return None
    header = lines[0]
    for label in _TOPO_LABELS:
        header = header.replace(label, label.replace(" ", "_"))
    columns = [cell.strip() for cell in (header.split("\t") if "\t" in header else header.split())]
    columns = [cell for cell in columns if cell]
    topology = {"devices": [], "links": {}, "cpu_affinity": {}, "numa_affinity": {}, "nic_names": {}}
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("Legend"):
            break
        cells = [cell.strip() for cell in line.split("\t")] if "\t" in line else line.split()
        name, values = cells[0], cells[1:]
        if not re.match(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|\w+\d+)$", name):
            continue
        topology["devices"].append(name)
        row = dict(zip(columns, values))
        topology["links"][name] = dict((peer, kind) for peer, kind in row.items()
                                       if peer not in ("CPU_Affinity", "NUMA_Affinity", "GPU_NUMA_ID") and kind and kind != "X")
        if row.get("CPU_Affinity"):
            topology["cpu_affinity"][name] = row["CPU_Affinity"]
        if row.get("NUMA_Affinity"):
            topology["numa_affinity"][name] = row["NUMA_Affinity"]
    for line in lines:
        match = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if match:
            topology["nic_names"][match.group(1)] = match.group(2)
    return topology


def gpu_profile(options, notes, probes=None):
    envelope = probe_catalogue.collect(["nvidia_smi"], options, probes)["nvidia_smi"]
    if envelope["status"] != "ok":
        notes.append("GPUs: %s" % envelope["reason"])
        return [], None, None
    data = envelope["data"] or {}
    topology = None
    try:
        rc, out, err = _command.run([nvidia_smi_binary(options), "topo", "-m"], options["timeouts"]["nvidia_smi"])
        if rc == 0:
            topology = parse_topology(out)
        else:
            notes.append("nvidia-smi topo -m exited with rc %s: %s" % (rc, (err or out).strip().splitlines()[:1]))
    except (_command.ProbeError, _command.ProbeAbsent) as exc:
        notes.append("nvidia-smi topo -m: %s" % exc)
    return [static_gpu(gpu) for gpu in data.get("gpus", [])], data.get("driver_version"), topology


def _int_or_none(text):
    try:
        value = int((text or "").strip())
    except ValueError:
        return None
    return value if value >= 0 else None  # speed reads -1 on a link that is down


def infiniband_ports(root, notes):
    """doctor's InfiniBand probe, in the profile's shape; a port tree it cannot read becomes a note."""
    try:
        found = system_probes.probe_infiniband({}, root=root)["ports"]
    except _command.ProbeAbsent:
        return []
    except _command.ProbeError as exc:
        notes.append("InfiniBand: %s" % exc)
        return []
    keys = ("device", "port", "rate_gbps", "rate", "state", "link_layer")
    # The probe reads an empty file as ""; the profile has always said None.
    return [dict((key, None if port[key] == "" else port[key]) for key in keys) for port in found]


def network_profile(root, notes):
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


def static_profile(options, root="/", probes=None, inventory=None):
    notes = []
    gpus, driver, topology = gpu_profile(options, notes, probes)
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


# ---------------------------------------------------------------------------------------------
# Options


def _kind_ok(value, kind):
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int) and value > 0
    if kind == "number":
        return isinstance(value, (int, float)) and value > 0
    return isinstance(value, str) and value != ""


def validate(benchmarks, benchmark_options, warmup_s, duration_s, sample_interval_s, expect, timeouts):
    for name in benchmarks:
        if name not in BENCHMARKS:
            raise ProfileInputError("benchmarks: unknown %r; accepted: %s" % (name, ", ".join(BENCHMARKS)))
    for label, value in (("warmup_s", warmup_s), ("duration_s", duration_s), ("sample_interval_s", sample_interval_s)):
        if not _kind_ok(value, "number") and not (label == "warmup_s" and value == 0):
            raise ProfileInputError("%s: %r is not a positive number of seconds" % (label, value))
    for name, opts in (benchmark_options or {}).items():
        if name not in OPTION_KINDS:
            raise ProfileInputError("benchmark_options: unknown benchmark %r; accepted: %s" % (name, ", ".join(BENCHMARKS)))
        if not isinstance(opts, dict):
            raise ProfileInputError("benchmark_options.%s: %r is not a dict" % (name, opts))
        for key, value in opts.items():
            kind = OPTION_KINDS[name].get(key)
            if kind is None:
                raise ProfileInputError("benchmark_options.%s: unknown option %r; accepted: %s"
                                        % (name, key, ", ".join(sorted(OPTION_KINDS[name]))))
            if not _kind_ok(value, kind) and not (key == "warmup_s" and value == 0):
                raise ProfileInputError("benchmark_options.%s.%s: %r is not a positive %s" % (
                    name, key, value, "integer" if kind == "int" else "number" if kind == "number" else "string"))
    directory = ((benchmark_options or {}).get("disk") or {}).get("directory")
    if "disk" in benchmarks and directory and not os.path.isdir(directory):
        raise ProfileInputError("benchmark_options.disk.directory: %s is not an existing directory" % directory)
    problems = registry.invalid_expectations(expect)
    if problems:
        raise ProfileInputError(problems[0])
    for name, value in (timeouts or {}).items():
        if name not in DEFAULT_TIMEOUTS:
            raise ProfileInputError("timeouts: unknown %r; accepted: %s" % (name, ", ".join(sorted(DEFAULT_TIMEOUTS))))
        if not _kind_ok(value, "number"):
            raise ProfileInputError("timeouts.%s: %r is not a positive number of seconds" % (name, value))


# ---------------------------------------------------------------------------------------------
# The run


FIGURE_NAMES = {"read_latency_us.p99": "read_latency_p99_us"}


def _figure(source, path):
    value = source
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _flatten(benchmarks):
    """Headline figures as continuum-hydra's benchmark_results list (name, status, result, unit, message)."""
    results = []
    for key, figures in HEADLINES.items():
        bench = benchmarks[key]
        sources = [("%s.gpu%s." % (key, gpu["index"]), gpu) for gpu in bench.get("gpus") or []] or [(key + ".", bench)]
        for prefix, source in sources:
            status = STATUS_OF.get(source.get("status"), "ERROR")
            for path, unit in figures:
                value = _figure(source, path)
                results.append({"name": prefix + FIGURE_NAMES.get(path, path),
                                "status": "SKIP" if value is None and status == "PASS" else status,
                                "result": value, "unit": unit, "message": source.get("message") or bench.get("message")})
    return results


def _merged(benchmark_options, name, warmup_s, duration_s):
    opts = {"warmup_s": warmup_s, "duration_s": duration_s}
    opts.update((benchmark_options or {}).get(name) or {})
    return opts


def _run_one(name, opts, context, progress):
    if name == "cpu":
        return cpu_bench.run_cpu(opts["warmup_s"], opts["duration_s"], matrix_n=opts.get("matrix_n", 2048),
                                 timeout_s=opts.get("timeout_s"), progress=progress)
    if name == "memory":
        return memory_bench.run_memory(opts["warmup_s"], opts["duration_s"], array_mib=opts.get("array_mib"),
                                       threads=opts.get("threads"), progress=progress, root=context["root"])
    if name == "disk":
        directory = opts.get("directory") or tempfile.gettempdir()
        result = disk_bench.run_disk(directory, file_size_mib=opts.get("file_size_mib", 256), warmup_s=opts["warmup_s"],
                                     duration_s=opts["duration_s"], timeout_s=opts.get("timeout_s"), progress=progress)
        mount = mount_for(os.path.realpath(directory), read_mounts(context["root"], result["notes"])) or {}
        result["filesystem_type"] = mount.get("fs_type")
        result["device"] = mount.get("device")
        result["rotational"] = block_device_rotational(context["root"], mount.get("device"))
        if mount.get("fs_type") in _host_analysis.MEMORY_FILE_SYSTEMS:
            result["notes"].append("%s is on %s (memory): the figures are RAM, not disk" % (directory, mount["fs_type"]))
        return result
    return gpu_bench.run_gpu(opts["warmup_s"], opts["duration_s"], python=context["torch_python"],
                             matrix_n=opts.get("matrix_n", 8192), transfer_mib=opts.get("transfer_mib", 256),
                             device_copy_mib=opts.get("device_copy_mib", 1024), repeats=opts.get("repeats", 10),
                             timeout_s=opts.get("timeout_s"), progress=progress, inventory=context["inventory"])


def _measured_under_telemetry(name, opts, context, sampler, log):
    """One benchmark, never raising: its outcome with the telemetry of its run (and of each GPU's run)."""
    log.phase_start(name, warmup_s=opts["warmup_s"], duration_s=opts["duration_s"])
    began = time.monotonic()
    try:
        result = _run_one(name, opts, context, log.progress_reporter(name))
    except BenchError as exc:
        result = outcome(FAILED, str(exc))
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # A bug in one benchmark must not lose the others' figures.
        result = outcome(FAILED, "%s benchmark crashed: %s: %s" % (name, type(exc).__name__, exc))
    ended = time.monotonic()
    result["telemetry"] = sampler.summary(began, ended)
    for gpu in result.get("gpus") or []:
        window = gpu.pop("_window", (began, ended))
        gpu["telemetry"] = next((g for g in sampler.summary(*window)["gpus"] if g["index"] == gpu["index"]), None)
    log.phase_end(name, result["status"], message=result.get("message"))
    return result


def _torch_inventory(torch_python, timeout_s):
    if not torch_python and importlib.util.find_spec("torch") is None:
        return {"status": "absent", "reason": "torch is not installed for %s" % sys.executable}
    try:
        return gpu_bench.torch_inventory(torch_python, timeout_s)
    except BenchError as exc:
        return {"status": "error", "reason": str(exc)}


def run(benchmarks=BENCHMARKS, benchmark_options=None, warmup_s=2.0, duration_s=10.0, sample_interval_s=1.0, expect=None,
        timeouts=None, nvidia_smi_path=None, torch_python=None, run_log=None, root="/", probes=None, nvml=None):
    """The profile result of this host. ``probes``/``nvml``/``root`` replace the real sources in tests."""
    start = time.monotonic()
    validate(benchmarks or [], benchmark_options, warmup_s, duration_s, sample_interval_s, expect, timeouts)
    benchmarks = [name for name in BENCHMARKS if name in (benchmarks or [])]
    try:
        log = RunLog(run_log)
    except ValueError as exc:
        raise ProfileInputError(str(exc))
    expect = expect or {}
    options = {"timeouts": dict(DEFAULT_TIMEOUTS, **(timeouts or {})), "nvidia_smi_path": nvidia_smi_path,
               "torch_python": torch_python, "expect": expect}
    try:
        log.event("run_start", benchmarks=benchmarks)
        log.phase_start("static_profile")
        inventory = _torch_inventory(torch_python, options["timeouts"]["torch"])
        static = static_profile(options, root=root, probes=probes, inventory=inventory)
        log.phase_end("static_profile", "ok", gpus=len(static["gpus"]), notes=len(static["notes"]))
        results = dict((key, outcome(SKIPPED, "not selected")) for key in RESULT_KEYS.values())
        sampler = None
        if benchmarks:
            sampler = telemetry.Sampler(sample_interval_s, proc_stat=os.path.join(root, "proc/stat"))
            if static["gpus"]:  # a CPU-only host gets CPU telemetry without GPU-source noise
                source, source_notes = telemetry.pick_gpu_source(sampler.add_gpu_row, sample_interval_s, nvidia_smi_path, nvml=nvml)
                sampler.gpu_source = source
                sampler.notes.extend(source_notes)
            sampler.start()
        context = {"root": root, "torch_python": torch_python, "inventory": inventory}
        try:
            for name in benchmarks:
                results[RESULT_KEYS[name]] = _measured_under_telemetry(
                    name, _merged(benchmark_options, name, warmup_s, duration_s), context, sampler, log)
        finally:
            if sampler is not None:
                sampler.stop()
        analysis, remediation = _host_analysis.analyze(static, results, expect)
        log.event("verdict", primary=analysis["primary_bottleneck"], secondary=analysis["secondary_bottleneck"],
                  confidence=analysis["confidence"])
        log.event("run_end")
    finally:
        log.close()
    return {
        "schema_version": PROFILE_SCHEMA_VERSION,
        "static_profile": static,
        "benchmark_results": _flatten(results),
        "benchmarks": results,
        "telemetry": sampler.describe() if sampler is not None else None,
        "analysis": analysis,
        "remediation": remediation,
        "run_log": run_log,
        "phases": log.phases,
        "total_duration_ms": round((time.monotonic() - start) * 1000.0, 3),
    }
