# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One host's profile result -> the compact figures and verdict the fleet report shows for it (pure).

The callback stores, per host, the profile module's ``schema_version``,
``static_profile``, ``benchmarks``, ``analysis`` and ``remediation`` (or the
whole result) and hands them to profile_summary(). Fleet-wide analysis
(classes, stragglers) works on these rows.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

GPU_FIGURES = ("bf16_tflops", "fp16_tflops", "fp32_tflops", "h2d_gbps", "d2h_gbps", "memory_bandwidth_gbps")
TOP = 3


def _spread(values):
    values = [value for value in values if value is not None]
    if not values:
        return None
    return {"min": min(values), "mean": round(sum(values) / len(values), 3), "max": max(values)}


def _section(result, *path):
    value = result
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if value is not None else {}


def profile_summary(result):
    """Compact per-host row: verdict, headline figures, per-GPU figures; None for something that is no profile."""
    if not isinstance(result, dict) or not isinstance(result.get("benchmarks"), dict):
        return None
    cpu = _section(result, "benchmarks", "cpu_sustained")
    memory = _section(result, "benchmarks", "memory_bandwidth")
    disk = _section(result, "benchmarks", "disk_random_io")
    gpu_bench = _section(result, "benchmarks", "gpu_sustained")
    analysis = _section(result, "analysis")
    remediation = _section(result, "remediation")
    static_gpus = dict((gpu.get("index"), gpu) for gpu in _section(result, "static_profile").get("gpus") or [])
    gpus = []
    for entry in gpu_bench.get("gpus") or []:
        telemetry = entry.get("telemetry") or {}
        static = static_gpus.get(entry.get("index")) or {}
        # uuid follows a GPU across hosts and runs (history); memory bounds its share of a batch plan.
        row = {"index": entry.get("index"), "name": entry.get("name"), "status": entry.get("status"),
               "sku": static.get("sku"), "uuid": static.get("uuid"), "memory_total_mib": static.get("memory_total_mib")}
        row.update((key, entry.get(key)) for key in GPU_FIGURES)
        row["throttle_reasons"] = telemetry.get("throttle_reasons") or []
        row["temperature_max_c"] = telemetry.get("temperature_max_c")
        gpus.append(row)
    measured = [row for row in gpus if row["status"] == "ok"]
    temperatures = [row["temperature_max_c"] for row in measured if row["temperature_max_c"] is not None]
    # A stdlib fallback measures the interpreter, not the machine: its figures must not be ranked against
    # NumPy's (the host would read as a straggler), so only the NumPy methods' figures are compared.
    cpu_comparable = cpu.get("method") == "numpy_matmul"
    memory_comparable = memory.get("method") == "numpy_blocked"
    figures = {
        "cpu_single_thread_gflops": cpu.get("single_thread_gflops") if cpu_comparable else None,
        "cpu_all_cores_gflops": cpu.get("all_cores_gflops") if cpu_comparable else None,
        "cpu_method": cpu.get("method"),
        "memory_triad_gbps": memory.get("triad_gbps") if memory_comparable else None,
        "memory_copy_gbps": memory.get("copy_gbps") if memory_comparable else None,
        "memory_method": memory.get("method"),
        "disk_read_iops": disk.get("read_iops"),
        "disk_read_p99_us": (disk.get("read_latency_us") or {}).get("p99"),
        "disk_seq_read_mbps": disk.get("seq_read_mbps"),
        "disk_seq_write_mbps": disk.get("seq_write_mbps"),
        "disk_o_direct": disk.get("o_direct"),
        "gpu_count": len(gpus),
        "gpu_measured": len(measured),
        "gpu_throttle_reasons": sorted(set(reason for row in measured for reason in row["throttle_reasons"])),
        "gpu_temperature_max_c": max(temperatures) if temperatures else None,
    }
    for key in GPU_FIGURES:
        figures["gpu_" + key] = _spread(row[key] for row in measured)
    return {
        "schema_version": result.get("schema_version"),
        "verdict": {
            "primary_bottleneck": analysis.get("primary_bottleneck"),
            "secondary_bottleneck": analysis.get("secondary_bottleneck"),
            "confidence": analysis.get("confidence"),
            "priority": remediation.get("priority"),
            "reasons": list(analysis.get("reasons") or [])[:TOP],
            "actions": [action.get("title") for action in (remediation.get("actions") or [])[:TOP]],
        },
        "benchmark_status": dict((key, (value or {}).get("status")) for key, value in sorted(result["benchmarks"].items())),
        "figures": figures,
        "gpus": gpus,
    }
