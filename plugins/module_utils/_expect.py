# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one table of ``hydra_expect`` keys: what a host should look like, read by doctor and profile.

One inventory dict (``hydra_expect``) serves both features, so its keys are
declared here, once: each with its kind, its default (None: no default, the
rule that reads it falls back to the hardware's own limits or does not apply),
a one-line meaning (docs/checks.md) and the feature that reads it. A feature
validates a host's dict with ``problems(expect)`` before it starts, and reads
values with ``get(expect, key)``.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import copy
import math
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import WARNING

# Which feature reads a key.
DOCTOR = "doctor"
PROFILE = "profile"
BOTH = "both"
FABRIC = "fabric"  # the fabric test's planner, on the controller (plugin_utils/_fleet/fabric.py)
READERS = (DOCTOR, PROFILE, BOTH, FABRIC)

# Accepted Python types per declared kind of value (a bool is never an int or a number here).
KINDS: dict[str, tuple[type, ...]] = {"int": (int,), "number": (int, float), "str": (str,), "bool": (bool,), "list": (list,),
                                      "dict": (dict,)}


class Key(NamedTuple):
    """One declared hydra_expect key; ``shape``: for a structured value, its own validation (the first problem, or None)."""

    name: str
    kind: str
    default: Any
    meaning: str
    read_by: str
    shape: Optional[Callable[[Any], Optional[str]]] = None


# xid_policy (checks/xid.py gpu.xid_errors): code -> {severity, count, window_hours}. The severities are the XID
# table's (_host/gpus/xid_table.py, which checks they agree).
XID_SEVERITIES = ("critical", WARNING, "info")
XID_POLICY_FIELDS = ("severity", "count", "window_hours")


def xid_code(key: Any) -> Optional[int]:
    """An xid_policy key (an int, or its digits as a string: Ansible passes dict keys as strings) as the XID code."""
    if isinstance(key, int) and not isinstance(key, bool) and key > 0:
        return key
    if isinstance(key, str) and key.strip().isdigit() and len(key.strip()) <= 6 and int(key) > 0:
        return int(key)
    return None


def _xid_policy_shape(policy: Mapping[str, Any]) -> Optional[str]:
    for key in sorted(policy, key=str):
        rule = policy[key]
        where = "expect.xid_policy.%s" % key
        if xid_code(key) is None:
            return "expect.xid_policy: %r is not an XID code (a positive whole number)" % (key,)
        if not isinstance(rule, dict):
            return "%s: %r is not a mapping of severity, count, window_hours" % (where, rule)
        unknown = sorted(set(rule) - set(XID_POLICY_FIELDS), key=str)
        if unknown:
            return "%s: unknown field %r; accepted: %s" % (where, unknown[0], ", ".join(XID_POLICY_FIELDS))
        if rule.get("severity") not in XID_SEVERITIES:
            return "%s.severity: %r is not one of %s" % (where, rule.get("severity"), ", ".join(XID_SEVERITIES))
        count = rule.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            return "%s.count: %r is not a whole number >= 1" % (where, count)
        hours = rule.get("window_hours")
        if hours is not None and (isinstance(hours, bool) or not isinstance(hours, (int, float)) or not math.isfinite(hours)
                                  or hours <= 0):
            return "%s.window_hours: %r is not a positive number of hours" % (where, hours)
    return None


# The table, grouped by the feature and check family that reads each key.
KEYS: tuple[Key, ...] = (
    # doctor: GPUs and driver (checks/driver.py, configuration.py, health.py, xid.py, performance.py, fabric.py)
    Key("gpu_count", "int", None, "number of GPUs nvidia-smi must see", DOCTOR),
    Key("gpu_model", "str", None, "text every GPU's product name must contain (case-insensitive), e.g. A100", DOCTOR),
    Key("driver_min", "str", None, "lowest accepted NVIDIA driver version, e.g. 535.104.05", DOCTOR),
    Key("driver_max", "str", None, "highest accepted NVIDIA driver version", DOCTOR),
    Key("cuda_min", "str", None, "lowest CUDA version the driver must support, e.g. 12.2", DOCTOR),
    Key("pcie_gen", "int", None, "PCIe generation each GPU link must reach under load (instead of its max)", DOCTOR),
    Key("pcie_width", "int", None, "PCIe lanes each GPU link must have (instead of its max; 8 for x8 slots)", DOCTOR),
    Key("ecc_mode", "str", None, "ECC mode every GPU must have: enabled or disabled", DOCTOR),
    Key("mig_mode", "str", None, "MIG mode every MIG-capable GPU must have: enabled or disabled", DOCTOR),
    Key("persistence_mode", "str", None, "enabled, or disabled where persistence off is intended", DOCTOR),
    Key("ecc_correctable_warn", "int", 100, "correctable ECC errors per GPU since boot before WARN", DOCTOR),
    Key("temperature_warn_c", "number", None, "GPU temperature (C) from which gpu.temperature WARNs", DOCTOR),
    # Resolved by doctor's run into the kernel_log probe's options (the probe fetches only the window).
    Key("xid_window_hours", "int", 24, "hours of kernel log gpu.xid_errors reads", DOCTOR),
    Key("xid_policy", "dict", None,
        "gpu.xid_errors per-code overrides: {CODE: {severity: critical, warning or info; count: N; window_hours: M}}: the "
        "severity once N events of that code hit one GPU within M hours (default 1, xid_window_hours)", DOCTOR, _xid_policy_shape),
    Key("fabric_manager_log", "str", "/var/log/fabricmanager.log", "the Fabric Manager log gpu.fabric_manager reads for NVSwitch errors", DOCTOR),
    Key("gpu_busy_util_pct", "int", 10, "GPU utilization (%) from which a GPU counts as busy", DOCTOR),
    Key("pcie_replay_warn", "int", 100, "PCIe replays per GPU since driver load before WARN", DOCTOR),
    Key("row_remap_uncorrectable_warn", "int", 512, "rows remapped for uncorrectable errors per GPU before WARN", DOCTOR),
    Key("amd_compute_partition", "str", None, "AMD compute partition every MI300-class GPU must have: SPX, DPX, QPX or CPX", DOCTOR),
    Key("amd_memory_partition", "str", None, "AMD memory partition every MI300-class GPU must have: NPS1, NPS2 or NPS4", DOCTOR),
    Key("retired_pages_dbe_fail", "int", 15, "pages retired for double-bit errors per GPU (pre-Ampere) before FAIL", DOCTOR),
    # doctor and profile: GPU / NIC / NUMA topology (checks/topology.py, docs/topology.md)
    Key("nvlinks_per_pair", "int", None, "bonded NVLinks every GPU pair must have (18 H100 NVSwitch, 12 A100, 4 HGX A100 4-GPU)", DOCTOR),
    Key("placement_weight_numa", "number", 1.0, "weight of the GPU-NIC NUMA distance in the placement score", BOTH),
    Key("placement_weight_pcie", "number", 1.0, "weight of the GPU-NIC PCIe distance in the placement score", BOTH),
    Key("placement_weight_cpu", "number", 1.0, "weight of the job's CPUs outside the GPU's local CPUs in the placement score", BOTH),
    # doctor level deep: the anchors' own diagnostics (checks/dcgm.py, checks/rvs.py, docs/levels.md)
    Key("dcgm_diag_level", "int", 2,
        "`dcgmi diag -r` level gpu.dcgm_diag runs: 1 software, 2 + memory and PCIe (~2 min), 3 + stress and power (~15-30 min), 4", DOCTOR),
    Key("dcgm_host", "str", None, "DCGM host engine dcgmi diag connects to (`--host`, e.g. the GPU operator's nvidia-dcgm service)", DOCTOR),
    Key("rvs_level", "int", 2, "`rvs -r` level gpu.rvs runs (1-5; 2 PCIe and HBM checks, 3 + GEMM stress)", DOCTOR),
    Key("rvs_conf", "str", None, "RVS configuration file gpu.rvs runs (`rvs -c`) instead of `rvs -r <rvs_level>`", DOCTOR),
    # doctor: active checks at level deep (checks/active.py): FAIL below this fraction of the expected figure
    Key("matmul_min_fraction", "number", 0.75, "gpu.matmul_consistency: FAIL below this fraction of the SKU's bf16 matmul TFLOP/s", DOCTOR),
    Key("gpu_memory_bandwidth_min_fraction", "number", 0.75,
        "gpu.memory_bandwidth: FAIL below this fraction of the SKU's device copy GB/s (DCGM's memory bandwidth rule)", DOCTOR),
    Key("pcie_bandwidth_min_fraction", "number", 0.6, "gpu.pcie_under_load: FAIL below this fraction of the link's one-way rate", DOCTOR),
    Key("allreduce_busbw_gbps", "number", None, "gpu.allreduce_local: expected all-reduce bus bandwidth (GB/s) across the host's GPUs", DOCTOR),
    Key("allreduce_min_fraction", "number", 0.75, "gpu.allreduce_local: FAIL below this fraction of the expected bus bandwidth", DOCTOR),
    Key("host_memory_bandwidth_min_fraction", "number", 0.5,
        "system.memory_bandwidth: FAIL when the NumPy triad is below this fraction of the same machine's compiled-C "
        "STREAM triad (healthy hosts: 0.7-0.95)", DOCTOR),
    # doctor: software stack (checks/stack.py)
    Key("torch_required", "bool", None, "whether PyTorch must be installed; unset: expected where nvidia-smi lists GPUs", DOCTOR),
    Key("torch_version", "str", None, "expected PyTorch version prefix, e.g. `2.5` or `2.5.1`", DOCTOR),
    Key("torch_cuda_version", "str", None, "expected CUDA version of the PyTorch build, e.g. `12.4`", DOCTOR),
    # doctor: system and network (checks/system.py)
    Key("dev_shm_min_gb", "number", 1, "minimum /dev/shm size in GiB (NGC containers use --shm-size=1g)", DOCTOR),
    Key("cgroup_limit_warn_fraction", "number", 0.5,
        "WARN when this process's cgroup memory or CPU limit is below this fraction of the host's RAM / CPUs (0 turns it off)", DOCTOR),
    Key("edac_ce_warn", "int", 100, "corrected host memory (EDAC) errors per memory controller before WARN", DOCTOR),
    Key("numa_nodes", "int", None, "expected number of NUMA nodes with CPUs (BIOS NPS / SNC setting)", DOCTOR),
    # Resolved by doctor's run into the disk_space probe's options.
    Key("disk_paths", "list", ["/", "/tmp"], "paths whose filesystems system.disk_space measures", DOCTOR),
    Key("disk_min_free_gb", "number", None, "free space in GiB below which a disk path is WARN", DOCTOR),
    Key("ib_rate_gbps", "number", None, "minimum rate of every InfiniBand port in Gb/s (e.g. 400 for NDR)", DOCTOR),
    Key("ib_devices", "list", None, "RDMA devices network.ib_ports judges (default: all under /sys/class/infiniband)", DOCTOR),
    # doctor hands these to the fleet report, which judges interconnect counters across runs (checks/interconnect.py,
    # plugin_utils/_fleet/interconnect.py, docs/interconnect.md: each default and its source)
    Key("ib_symbol_error_per_hour", "number", 120, "symbol_error rate per port above which the fleet report FAILs it (IBTA BER 1e-12)", DOCTOR),
    Key("ib_link_downed_max", "int", 0, "link_downed increments per port between two runs above which the fleet report FAILs it", DOCTOR),
    Key("ib_link_error_recovery_per_minute", "number", 5, "link_error_recovery rate per port above which the fleet report WARNs", DOCTOR),
    Key("ib_port_rcv_errors_per_second", "number", 10, "port_rcv_errors rate per port above which the fleet report WARNs", DOCTOR),
    Key("ib_port_xmit_discards_per_second", "number", 100, "port_xmit_discards rate per port above which the fleet report WARNs", DOCTOR),
    Key("nvlink_crc_errors_per_second", "number", 100,
        "NVLink CRC error rate per link from which the fleet report FAILs (any increase WARNs)", DOCTOR),
    Key("nvlink_replay_recovery_max", "int", 0,
        "NVLink replay + recovery errors per link between two runs above which the fleet report FAILs", DOCTOR),
    Key("pcie_aer_correctable_per_minute", "number", 8,
        "correctable PCIe AER errors per minute of a GPU or NIC above which the fleet report WARNs", DOCTOR),
    Key("interconnect_clean_runs", "int", 3, "clean runs after which an interconnect finding (a flap, a rate) closes itself", DOCTOR),
    Key("nvlink_domain", "str", None,
        "multi-node NVLink domain (GB200/GB300 rack) of the host: hosts of one name must share one fabric cluster UUID and clique", DOCTOR),
    # doctor: the node-local SLURM health check's last result (checks/healthcheck.py, docs/slurm_healthcheck.md)
    Key("healthcheck_max_age_hours", "number", 24, "hours after which slurm.healthcheck holds hydra-healthcheck's last.json stale", DOCTOR),
    # doctor and the tenant_guard role: tenant SLOs and noisy neighbours (checks/tenant.py, docs/tenant-slos.md)
    Key("tenant_metrics_dir", "str", "/var/run/tenant_metrics", "directory where tenants write <PID>.metric (p99 latency, ms)", DOCTOR),
    Key("tenant_slo_p99_ms", "number", None, "tenant.slo: p99 latency (ms) over which a tenant is DEGRADED (WARN); unset: SKIP", DOCTOR),
    Key("tenant_persistence_runs", "int", 3, "tenant.slo: consecutive runs over the SLO before a tenant is VIOLATED (FAIL)", DOCTOR),
    Key("tenant_cooldown_runs", "int", 3, "tenant.slo: runs a tenant back under its SLO stays in COOLDOWN before NORMAL", DOCTOR),
    Key("tenant_io_sample_s", "number", 1.0, "tenant.slo: seconds over which /proc/<pid>/io is sampled for I/O rates", DOCTOR),
    Key("tenant_io_limit_max_bps", "int", 104857600, "tenant.slo tier 1: highest bytes/s limit put on a bully (the cap)", DOCTOR),
    Key("tenant_io_limit_min_bps", "int", 1048576, "tenant.slo tier 1: lowest bytes/s limit put on a bully", DOCTOR),
    Key("tenant_io_devices", "list", None, "tenant.slo tier 1: block devices (MAJ:MIN or path) to limit (default: the whole disks)", DOCTOR),
    # profile: the bottleneck verdict's floors (_profile/verdict.py)
    Key("gpu_bf16_tflops_min", "number", None, "profile: bf16 matmul TFLOP/s each GPU must reach", PROFILE),
    Key("gpu_h2d_gbps_min", "number", None, "profile: pinned host<->device GB/s each GPU must reach", PROFILE),
    Key("gpu_memory_bandwidth_gbps_min", "number", None, "profile: device memory GB/s each GPU must reach", PROFILE),
    Key("gpu_sku", "str", None, "profile: SKU table id to judge the GPUs against (h100_sxm, a100_pcie...)", PROFILE),
    Key("memory_triad_gbps_min", "number", 10.0,
        "host STREAM triad GB/s (profile; doctor's system.memory_bandwidth without a C compiler)", BOTH),
    Key("cpu_gflops_min", "number", None, "profile: all-core float64 matmul GFLOP/s", PROFILE),
    Key("disk_read_iops_min", "number", 1000.0, "profile: 4 KiB random-read IOPS at queue depth 1", PROFILE),
    Key("disk_read_p99_us_max", "number", 10000.0, "profile: 99th percentile 4 KiB read latency, microseconds", PROFILE),
    Key("disk_seq_read_mbps_min", "number", 200.0, "profile: sequential read MB/s", PROFILE),
    # the fabric test (playbooks/fabric.yml, docs/fabric.md)
    Key("fabric_busbw_gbps_min", "number", None,
        "fabric: all-reduce bus bandwidth (GB/s, largest size) a group of hosts must reach; unset: judged against the "
        "best group of a screening round", FABRIC),
)

_BY_NAME: dict[str, Key] = {entry.name: entry for entry in KEYS}


def table() -> dict[str, dict[str, Any]]:
    """Every declared key -> {kind, default, meaning, read_by}, for docs and validation messages."""
    return {entry.name: {"kind": entry.kind, "default": copy.deepcopy(entry.default), "meaning": entry.meaning,
                         "read_by": entry.read_by} for entry in KEYS}


def key(name: str) -> str:
    """A declared key's name, for a module constant: a typo fails at import with KeyError, not at run time."""
    return _BY_NAME[name].name


def is_kind(value: Any, kind: str) -> bool:
    """Whether value is of a declared kind (None always is: unset)."""
    if value is None:
        return True
    return isinstance(value, KINDS[kind]) and (kind == "bool" or not isinstance(value, bool))


def get(expect: Optional[Mapping[str, Any]], name: str) -> Any:
    """The host's value for a declared key, or the key's default when unset (None). KeyError for an undeclared key."""
    entry = _BY_NAME[name]
    value = (expect or {}).get(name)
    return copy.deepcopy(entry.default) if value is None else value


# A deadline that grows with the host's GPUs (profile's per-GPU benchmark, the remediation modules' nvidia-smi calls)
# counts expect.gpu_count, or this many GPUs where nothing says: an HGX/DGX board's 8.
GPUS_WHEN_UNKNOWN = 8


def gpus_for_deadline(expect: Optional[Mapping[str, Any]] = None, named: Optional[Any] = None) -> int:
    """How many GPUs a deadline counts: the GPUs ``named`` (a list), else expect.gpu_count, else GPUS_WHEN_UNKNOWN."""
    if isinstance(named, (list, tuple)) and named:
        return len(named)
    count = (expect or {}).get("gpu_count")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else GPUS_WHEN_UNKNOWN


def given(expect: Optional[Mapping[str, Any]], name: str) -> bool:
    """Whether the inventory set a declared key (a default does not count). KeyError for an undeclared key."""
    if name not in _BY_NAME:
        raise KeyError(name)
    return (expect or {}).get(name) is not None


def problems(expect: Optional[Mapping[str, Any]]) -> list[str]:
    """One message per unknown key or wrongly typed value in an expect dict, in key order; [] when it is fine."""
    found = []
    for name in sorted(expect or {}):
        value = (expect or {})[name]
        entry = _BY_NAME.get(name)
        if entry is None:
            found.append("expect: unknown key %r; accepted: %s" % (name, ", ".join(sorted(_BY_NAME))))
        elif not is_kind(value, entry.kind):
            found.append("expect.%s: %r is not a %s" % (name, value, entry.kind))
        elif value is not None and entry.shape is not None and entry.shape(value):
            found.append(str(entry.shape(value)))
    return found
