# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The per-host bottleneck verdict of profile: a pure function of the static profile and the benchmarks.

Every rule turns a measurement (or the telemetry taken while it ran) into a
finding {bottleneck, score 0..1, reason}. A figure below its floor scores by
its shortfall (0.5 just under the floor, 1.0 at half of it); telemetry
evidence has fixed scores (thermal slowdown under load 0.9, a narrowed PCIe
link under load 0.8). A bottleneck's score is its strongest finding plus
0.05 per further finding. The primary and secondary bottlenecks are the two
best scores of at least 0.35; the confidence grows with the primary's score,
its lead over the next one and the strength of the reference it was judged
against.

Floors, in order of precedence: the inventory's ``hydra_expect`` keys
declared below; the SKU table (skus.py: 0.9x the best measured bf16 matmul,
0.8x the host link rate for pinned copies, 0.7x the datasheet device memory
bandwidth); for the host, the declared defaults.

The recommended actions are vendor-correct: the GPUs a bottleneck's findings blame carry their vendor (the static
profile's ``vendor: amd``; NVIDIA otherwise). For AMD GPUs an action naming an NVIDIA tool gives the amd-smi
equivalent (``amd-smi set/reset --power-cap``, ``amd-smi reset --clocks``) and NVIDIA-only advice (persistence mode)
is dropped; when both vendors are blamed the NVIDIA text is followed by "On the AMD GPUs:" and the AMD one.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.skus import find_sku, link_rate_gbps
from ansible_collections.continuum.hydra.plugins.module_utils._status import BENCH_FALLBACK, BENCH_OK

GPU_BF16_TFLOPS_MIN = _expect.key("gpu_bf16_tflops_min")
GPU_H2D_GBPS_MIN = _expect.key("gpu_h2d_gbps_min")
GPU_MEMORY_GBPS_MIN = _expect.key("gpu_memory_bandwidth_gbps_min")
GPU_SKU = _expect.key("gpu_sku")
MEMORY_TRIAD_GBPS_MIN = _expect.key("memory_triad_gbps_min")
CPU_GFLOPS_MIN = _expect.key("cpu_gflops_min")
DISK_READ_IOPS_MIN = _expect.key("disk_read_iops_min")
DISK_P99_US_MAX = _expect.key("disk_read_p99_us_max")
DISK_SEQ_READ_MBPS_MIN = _expect.key("disk_seq_read_mbps_min")

Expect = Mapping[str, Any]  # the host's hydra_expect
Sku = Mapping[str, Any]  # one entry of skus.SKUS
Record = dict[str, Any]  # one finding {bottleneck, score, reason, evidence}

SCORE_THRESHOLD = 0.35
GPU_MEASURED_SHARE = 0.9     # of the best measured matmul (MAMF)
PEAK_MEASURED_SHARE = 0.8    # best measured / datasheet when the table has no measured figure (80-87% in MAMF)
HOST_LINK_SHARE = 0.8        # of the PCIe link rate for pinned copies
DEVICE_MEMORY_SHARE = 0.7    # of the datasheet device memory bandwidth
SM_CLOCK_SHARE = 0.8         # of the maximum SM clock while busy
POWER_LIMIT_SHARE = 0.95     # of the default power limit
MIN_SCALING_MATRIX_N = 1024
MEMORY_FILE_SYSTEMS = ("tmpfs", "ramfs")

THERMAL_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown")
POWER_REASONS = ("sw_power_cap", "hw_power_brake_slowdown", "hw_slowdown")

_ACTIONS = {
    "gpu_thermal": [
        ("Fix GPU cooling", "high", "medium", "Thermal slowdown under load: check fans, airflow, inlet temperature and blanking panels."),
        ("Drain the host until cooled", "high", "low", "A GPU that throttles on heat slows every rank of a job that uses it."),
    ],
    "gpu_power": [
        ("Restore the default GPU power limit", "high", "low", "A lowered or capped power limit clips clocks under load (nvidia-smi -pl)."),
        ("Check PSU and power-brake signals", "medium", "medium", "HW power brake / slowdown means the board asked for less power."),
    ],
    "gpu_clocks": [
        ("Reset application clocks and clock locks", "high", "low", "SM clocks stayed low under load (nvidia-smi -rac / -rgc)."),
        ("Enable persistence mode", "medium", "low", "Without it the driver reinitialises and clocks ramp slowly."),
    ],
    "gpu_host_link": [
        ("Reseat the GPU or riser, check the slot", "high", "medium", "The PCIe link trained narrower or slower than the card supports."),
        ("Check BIOS PCIe settings and ACS / IOMMU", "medium", "medium", "Pinned copies below the link rate point at the host path."),
    ],
    "gpu_compute": [
        ("Run doctor and dcgmi diag on the GPU", "high", "low", "Matmul throughput below the SKU's measured reference with no throttle reason."),
        ("Compare with the GPU's node peers", "medium", "low", "A GPU 5% below its peers in one node is a straggler for every job."),
    ],
    "gpu_memory_bandwidth": [
        ("Check ECC / row-remapping state and memory clocks", "high", "low", "Device memory bandwidth below 0.7x the datasheet."),
    ],
    "memory_bandwidth": [
        ("Populate every memory channel evenly", "high", "high", "Host STREAM triad below the floor: missing or unbalanced DIMMs."),
        ("Check NUMA placement and BIOS memory settings", "medium", "medium", "Remote-node memory and power-saving modes cut bandwidth."),
    ],
    "cpu_compute": [
        ("Set the CPU governor to performance", "high", "low", "Power-saving governors lower sustained clocks."),
        ("Check CPU quotas and competing load", "medium", "low", "All-core throughput far below cores x one thread means shared CPUs."),
    ],
    "disk_io": [
        ("Move datasets to local NVMe", "high", "high", "Random 4 KiB reads too slow for data loading."),
        ("Use sharded / sequential dataset formats and prefetch", "high", "medium", "Large sequential reads hide random-read latency."),
    ],
}


# The AMD equivalent of each action above that names an NVIDIA tool (amd-smi long options, amdsmi_cli's parser);
# None: NVIDIA-only advice, dropped for AMD GPUs.
_AMD_ACTIONS: dict[str, Optional[tuple[str, str, str, str]]] = {
    "Restore the default GPU power limit": (
        "Restore the default GPU power cap", "high", "low",
        "A lowered power cap clips clocks under load (amd-smi reset --gpu <index> --power-cap, or amd-smi set --gpu <index> --power-cap <watts>)."),
    "Reset application clocks and clock locks": (
        "Reset clocks and overdrive", "high", "low", "GFX clocks stayed low under load (amd-smi reset --gpu <index> --clocks)."),
    "Enable persistence mode": None,
    "Run doctor and dcgmi diag on the GPU": (
        "Run doctor and the ROCm Validation Suite (rvs) on the GPU", "high", "low",
        "Matmul throughput below the SKU's measured reference with no throttle reason."),
    "Check ECC / row-remapping state and memory clocks": (
        "Check ECC / bad-page state and memory clocks", "high", "low",
        "Device memory bandwidth below 0.7x the datasheet (amd-smi bad-pages --gpu <index>)."),
}
AMD = "amd"
NVIDIA = "nvidia"


def _vendor(static_gpu: Mapping[str, Any], entry: Mapping[str, Any]) -> str:
    return AMD if AMD in (static_gpu.get("vendor"), entry.get("vendor")) else NVIDIA


def actions_for(bottleneck: Optional[str], vendors: Iterable[str]) -> list[tuple[str, str, str, str]]:
    """The actions of one bottleneck, worded for the GPU vendors it blames (NVIDIA when none is known)."""
    vendors = set(vendors) or {NVIDIA}
    out = []
    for action in _ACTIONS.get(bottleneck or "", []):
        amd = _AMD_ACTIONS.get(action[0], action)
        if AMD not in vendors or amd == action:
            out.append(action)
        elif NVIDIA not in vendors:
            if amd is not None:
                out.append(amd)
        elif amd is None:
            out.append(action)
        else:
            out.append(action[:3] + ("%s On the AMD GPUs: %s" % (action[3], amd[3]),))
    return out


def shortfall_score(measured: float, floor: float) -> float:
    """0.5 just below the floor, rising to 1.0 at half of it."""
    return min(1.0, 0.5 + (1.0 - float(measured) / floor))


def _finding(bottleneck: str, score: float, reason: str, evidence: str) -> Record:
    return {"bottleneck": bottleneck, "score": round(score, 3), "reason": reason, "evidence": evidence}


def _gpu_label(entry: Mapping[str, Any]) -> str:
    return "GPU %s (%s)" % (entry.get("index"), entry.get("name") or "unknown model")


def _measured(benchmark: Any) -> bool:
    return isinstance(benchmark, dict) and benchmark.get("status") in (BENCH_OK, BENCH_FALLBACK)


def _bf16_floor(entry: Mapping[str, Any], sku: Optional[Sku], expect: Expect) -> Optional[tuple[float, str, str, str]]:
    """(floor TFLOP/s, dtype key, how it was chosen, evidence) for a GPU, or None without a reference."""
    floor = _expect.get(expect, GPU_BF16_TFLOPS_MIN)
    if floor:
        return floor, "bf16_tflops", "hydra_expect gpu_bf16_tflops_min", "expectation"
    if sku is None:
        return None
    measured = sku.get("bf16_tflops_measured")
    if measured:
        floor = GPU_MEASURED_SHARE * measured
        return floor, "bf16_tflops", "%.1f = 0.9x the %s best measured %.1f" % (floor, sku["label"], measured), "sku_measured"
    key = "bf16_tflops" if sku.get("bf16_tflops_peak") else "fp16_tflops"
    peak = sku.get(key + "_peak")
    if not peak:
        return None
    floor = GPU_MEASURED_SHARE * PEAK_MEASURED_SHARE * peak
    return floor, key, "%.1f = 0.9 x 0.8 x the %s datasheet %.1f" % (floor, sku["label"], peak), "sku_peak"


def _gpu_findings(entry: Mapping[str, Any], static_gpu: Mapping[str, Any], expect: Expect) -> tuple[list[Record], list[str]]:
    findings: list[Record] = []
    notes: list[str] = []
    label = _gpu_label(entry)
    sku = find_sku(entry.get("name"), _expect.get(expect, GPU_SKU))
    telemetry = entry.get("telemetry") or {}
    reasons = set(telemetry.get("throttle_reasons") or [])
    thermal = sorted(reasons.intersection(THERMAL_REASONS))
    power = sorted(reasons.intersection(POWER_REASONS))
    clock_busy: Any = telemetry.get("sm_clock_busy_mean_mhz")
    clock_max: Any = telemetry.get("sm_clock_max_mhz") or ((static_gpu.get("max_clocks") or {}).get("sm_mhz"))
    clock_low = bool(clock_busy and clock_max and clock_busy < SM_CLOCK_SHARE * clock_max)
    clock_text = ("; SM clock %.0f of %.0f MHz while busy" % (clock_busy, clock_max)) if clock_busy and clock_max else ""

    compute = None
    floor = _bf16_floor(entry, sku, expect)
    if floor is None:
        notes.append("%s: no SKU reference and no gpu_bf16_tflops_min: matmul figures reported, not judged" % label)
    elif entry.get(floor[1]) is not None:
        value, limit = entry[floor[1]], floor[0]
        if value < limit:
            compute = (value, limit, floor)
    if thermal:
        findings.append(_finding("gpu_thermal", 0.9, "%s: %s under load, up to %s C%s" % (
            label, ", ".join(thermal), telemetry.get("temperature_max_c"), clock_text), "telemetry"))
    if power:
        hard = reasons.intersection(("hw_power_brake_slowdown", "hw_slowdown"))
        if compute or clock_low or hard:
            findings.append(_finding("gpu_power", 0.8, "%s: %s under load at %s W%s" % (
                label, ", ".join(power), telemetry.get("power_max_w"), clock_text), "telemetry"))
        else:
            findings.append(_finding("gpu_power", 0.3, "%s: %s under load at %s W, throughput within expectations" % (
                label, ", ".join(power), telemetry.get("power_max_w")), "telemetry"))
    limits = static_gpu.get("power") or {}
    if limits.get("limit_w") and limits.get("default_limit_w") and limits["limit_w"] < POWER_LIMIT_SHARE * limits["default_limit_w"]:
        findings.append(_finding("gpu_power", 0.7, "%s: power limit %.0f W is below the default %.0f W" % (
            label, limits["limit_w"], limits["default_limit_w"]), "static"))
    if clock_low and not thermal and not power:
        findings.append(_finding("gpu_clocks", 0.6, "%s: SM clock %.0f MHz while busy, below %.0f%% of its %.0f MHz maximum" % (
            label, clock_busy, 100 * SM_CLOCK_SHARE, clock_max), "telemetry"))
    if compute:
        value, limit, (_floor, key, how, evidence) = compute
        bottleneck = "gpu_thermal" if thermal else "gpu_power" if power else "gpu_clocks" if clock_low else "gpu_compute"
        findings.append(_finding(bottleneck, shortfall_score(value, limit), "%s: %s %.1f TFLOP/s is below the floor %s" % (
            label, key.replace("_tflops", ""), value, how), evidence))
    findings.extend(_link_findings(entry, static_gpu, sku, telemetry, expect, label))
    memory_floor = _expect.get(expect, GPU_MEMORY_GBPS_MIN)
    how = "hydra_expect gpu_memory_bandwidth_gbps_min"
    if not memory_floor and sku is not None and sku.get("memory_bandwidth_tbps"):
        memory_floor = DEVICE_MEMORY_SHARE * sku["memory_bandwidth_tbps"] * 1000.0
        how = "%.0f = 0.7x the %s datasheet %.2f TB/s" % (memory_floor, sku["label"], sku["memory_bandwidth_tbps"])
    if memory_floor and entry.get("memory_bandwidth_gbps") is not None and entry["memory_bandwidth_gbps"] < memory_floor:
        findings.append(_finding("gpu_memory_bandwidth", shortfall_score(entry["memory_bandwidth_gbps"], memory_floor),
                                 "%s: device memory %.0f GB/s is below the floor %s" % (label, entry["memory_bandwidth_gbps"], how),
                                 "expectation" if how.startswith("hydra") else "sku_peak"))
    return findings, notes


def _link_findings(entry: Mapping[str, Any], static_gpu: Mapping[str, Any], sku: Optional[Sku], telemetry: Mapping[str, Any],
                   expect: Expect, label: str) -> list[Record]:
    findings: list[Record] = []
    pcie = static_gpu.get("pcie") or {}
    gen_max = telemetry.get("pcie_gen_max") or pcie.get("gen_max") or (sku or {}).get("pcie_gen")
    width_max = telemetry.get("pcie_width_max") or pcie.get("width_max") or (sku or {}).get("pcie_width")
    gen_busy, width_busy = telemetry.get("pcie_gen_busy_min"), telemetry.get("pcie_width_busy_min")
    if (gen_busy and gen_max and gen_busy < gen_max) or (width_busy and width_max and width_busy < width_max):
        findings.append(_finding("gpu_host_link", 0.8, "%s: PCIe link Gen%s x%s under load, capable of Gen%s x%s" % (
            label, gen_busy, width_busy, gen_max, width_max), "telemetry"))
    elif not width_busy and pcie.get("width_current") and width_max and pcie["width_current"] < width_max:
        findings.append(_finding("gpu_host_link", 0.6, "%s: PCIe link width x%s of x%s (read at idle)" % (
            label, pcie["width_current"], width_max), "static"))
    copies = [value for value in (entry.get("h2d_gbps"), entry.get("d2h_gbps")) if value is not None]
    floor = _expect.get(expect, GPU_H2D_GBPS_MIN)
    how, evidence = "hydra_expect gpu_h2d_gbps_min", "expectation"
    rate = link_rate_gbps(gen_max, width_max)
    if not floor and rate:
        floor = HOST_LINK_SHARE * rate
        how, evidence = "%.1f = 0.8x the Gen%s x%s rate %.1f GB/s" % (floor, gen_max, width_max, rate), "link_rate"
    if copies and floor and min(copies) < floor:
        findings.append(_finding("gpu_host_link", shortfall_score(min(copies), floor),
                                 "%s: pinned copies H2D %s / D2H %s GB/s, below the floor %s" % (
                                     label, entry.get("h2d_gbps"), entry.get("d2h_gbps"), how), evidence))
    return findings


def _host_findings(static_profile: Mapping[str, Any], benchmarks: Mapping[str, Any], expect: Expect) -> tuple[list[Record], list[str]]:
    findings: list[Record] = []
    notes: list[str] = []
    memory = benchmarks.get("memory_bandwidth") or {}
    if _measured(memory):
        floor = _expect.get(expect, MEMORY_TRIAD_GBPS_MIN)
        if memory.get("triad_gbps") is None:
            notes.append("host memory bandwidth not judged: %s measures copy only" % memory.get("method"))
        elif memory["triad_gbps"] < floor:
            findings.append(_finding("memory_bandwidth", shortfall_score(memory["triad_gbps"], floor),
                                     "host STREAM triad %.1f GB/s on %s threads is below the floor %.1f GB/s" % (
                                         memory["triad_gbps"], memory.get("threads"), floor),
                                     "expectation" if expect.get(MEMORY_TRIAD_GBPS_MIN) else "default"))
    cpu = benchmarks.get("cpu_sustained") or {}
    if _measured(cpu):
        if cpu.get("method") != "numpy_matmul":
            notes.append("CPU throughput not judged: %s is not a FLOP/s figure of the hardware" % cpu.get("method"))
        else:
            floor = _expect.get(expect, CPU_GFLOPS_MIN)
            if floor and cpu.get("all_cores_gflops") is not None and cpu["all_cores_gflops"] < floor:
                findings.append(_finding("cpu_compute", shortfall_score(cpu["all_cores_gflops"], floor),
                                         "all-core matmul %.1f GFLOP/s is below the floor %.1f" % (cpu["all_cores_gflops"], floor),
                                         "expectation"))
            threads = cpu.get("threads") or 1
            # Small matrices do not scale on any machine: only a 1024+ matmul says something about the CPUs.
            if (threads >= 2 and (cpu.get("matrix_n") or 0) >= MIN_SCALING_MATRIX_N and cpu.get("scaling_x") is not None
                    and cpu["scaling_x"] < 0.5 * threads):
                findings.append(_finding("cpu_compute", 0.5, "all-core matmul is %.2fx one thread on %d CPUs: CPUs shared "
                                         "or throttled" % (cpu["scaling_x"], threads), "heuristic"))
    governors = ((static_profile.get("cpu") or {}).get("governors")) or []
    if "powersave" in governors:
        findings.append(_finding("cpu_compute", 0.4, "CPU frequency governor is powersave", "static"))
    disk = benchmarks.get("disk_random_io") or {}
    if _measured(disk):
        if not disk.get("o_direct") or disk.get("filesystem_type") in MEMORY_FILE_SYSTEMS:
            why = "a memory file system" if disk.get("o_direct") else "read without O_DIRECT"
            notes.append("disk not judged: %s is %s" % (disk.get("directory"), why))
        else:
            findings.extend(_disk_findings(disk, expect))
    return findings, notes


def _disk_findings(disk: Mapping[str, Any], expect: Expect) -> list[Record]:
    findings: list[Record] = []
    where = disk.get("directory")
    iops_floor = _expect.get(expect, DISK_READ_IOPS_MIN)
    if disk.get("read_iops") is not None and disk["read_iops"] < iops_floor:
        findings.append(_finding("disk_io", shortfall_score(disk["read_iops"], iops_floor),
                                 "4 KiB random reads in %s: %.0f IOPS, below the floor %.0f" % (where, disk["read_iops"], iops_floor),
                                 "expectation" if expect.get(DISK_READ_IOPS_MIN) else "default"))
    p99 = (disk.get("read_latency_us") or {}).get("p99")
    p99_max = _expect.get(expect, DISK_P99_US_MAX)
    if p99 is not None and p99 > p99_max:
        findings.append(_finding("disk_io", shortfall_score(p99_max, p99),
                                 "4 KiB read p99 latency in %s: %.0f us, above %.0f us" % (where, p99, p99_max),
                                 "expectation" if expect.get(DISK_P99_US_MAX) else "default"))
    seq_floor = _expect.get(expect, DISK_SEQ_READ_MBPS_MIN)
    if disk.get("seq_read_mbps") is not None and disk["seq_read_mbps"] < seq_floor:
        findings.append(_finding("disk_io", shortfall_score(disk["seq_read_mbps"], seq_floor),
                                 "sequential read in %s: %.0f MB/s, below the floor %.0f" % (where, disk["seq_read_mbps"], seq_floor),
                                 "expectation" if expect.get(DISK_SEQ_READ_MBPS_MIN) else "default"))
    return findings


def _scores(findings: Iterable[Record]) -> dict[str, float]:
    by_bottleneck: dict[str, list[float]] = {}
    for item in findings:
        by_bottleneck.setdefault(item["bottleneck"], []).append(item["score"])
    return {name: min(1.0, max(scores) + 0.05 * (len(scores) - 1)) for name, scores in by_bottleneck.items()}


def analyze(static_profile: Mapping[str, Any], benchmarks: Mapping[str, Any],
            expect: Optional[Expect] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(analysis, remediation) of one host: primary/secondary bottleneck, confidence, reasons, actions."""
    expect = expect or {}
    static_gpus = {gpu.get("index"): gpu for gpu in (static_profile.get("gpus") or [])}
    findings, notes = _host_findings(static_profile, benchmarks, expect)
    gpu_bench = benchmarks.get("gpu_sustained") or {}
    blamed: dict[str, set[str]] = {}  # bottleneck -> vendors of the GPUs its findings blame
    for entry in gpu_bench.get("gpus") or []:
        if entry.get("status") == BENCH_OK:
            static_gpu = static_gpus.get(entry.get("index"), {})
            gpu_findings, gpu_notes = _gpu_findings(entry, static_gpu, expect)
            findings.extend(gpu_findings)
            notes.extend(gpu_notes)
            for item in gpu_findings:
                blamed.setdefault(item["bottleneck"], set()).add(_vendor(static_gpu, entry))
    host_vendors = {_vendor(gpu, {}) for gpu in static_gpus.values()}
    scores = _scores(findings)
    ranked = sorted((item for item in scores.items() if item[1] >= SCORE_THRESHOLD), key=lambda item: (-item[1], item[0]))
    primary = ranked[0][0] if ranked else None
    secondary = ranked[1][0] if len(ranked) > 1 else None
    families = sum(1 for key in ("cpu_sustained", "memory_bandwidth", "gpu_sustained", "disk_random_io") if _measured(benchmarks.get(key)))
    if primary:
        margin = ranked[0][1] - (ranked[1][1] if secondary else 0.0)
        strong = any(item["evidence"] in ("telemetry", "expectation", "sku_measured", "link_rate")
                     for item in findings if item["bottleneck"] == primary)
        confidence = 0.45 + 0.35 * ranked[0][1] + 0.15 * min(1.0, margin / 0.3) + (0.05 if strong else 0.0)
    else:
        confidence = 0.3 + 0.1 * families
    confidence = round(min(0.95, confidence), 2)
    findings.sort(key=lambda item: (-item["score"], item["bottleneck"], item["reason"]))
    actions = []
    for bottleneck in (primary, secondary):
        for title, impact, difficulty, reason in actions_for(bottleneck, blamed.get(bottleneck or "") or host_vendors):
            actions.append({"title": title, "impact": impact, "difficulty": difficulty, "reason": reason, "bottleneck": bottleneck})
    analysis = {
        "primary_bottleneck": primary,
        "secondary_bottleneck": secondary,
        "confidence": confidence,
        "scores": {name: round(score, 3) for name, score in sorted(scores.items())},
        "reasons": [item["reason"] for item in findings],
        "findings": findings,
        "recommendations": [action["title"] for action in actions],
        "notes": notes,
        "benchmarks_measured": families,
    }
    if primary is None:
        priority = "low"
    else:
        priority = "high" if confidence >= 0.7 else "medium" if confidence >= 0.4 else "low"
    return analysis, {"priority": priority, "actions": actions}
