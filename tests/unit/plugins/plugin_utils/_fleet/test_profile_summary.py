"""The fleet report's per-host profile row: compact figures and verdict from one host's profile result."""

from ansible_collections.continuum.hydra.plugins.module_utils._profile import run as _profile
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.profile_summary import profile_summary


def test_summary_of_a_real_profile_result(tmp_path):
    result = _profile.run(benchmarks=["memory", "disk"], warmup_s=0.05, duration_s=0.1, sample_interval_s=0.05,
                          benchmark_options={"memory": {"array_mib": 16}, "disk": {"directory": str(tmp_path), "file_size_mib": 2}},
                          expect={"memory_triad_gbps_min": 1e6})  # an impossible floor: a verdict to carry
    row = profile_summary(result)
    memory, disk = result["benchmarks"]["memory_bandwidth"], result["benchmarks"]["disk_random_io"]
    # The memory figure is named by its instrument: compiled STREAM where a compiler exists, NumPy's otherwise.
    name = {"c_stream": "memory_triad_gbps", "numpy_blocked": "memory_numpy_triad_gbps"}[memory["method"]]
    assert row["figures"][name] == memory["triad_gbps"] and row["figures"]["memory_method"] == memory["method"]
    assert row["figures"]["disk_read_iops"] == disk["read_iops"]
    assert row["figures"]["disk_read_p99_us"] == disk["read_latency_us"]["p99"]
    assert row["figures"]["cpu_all_cores_gflops"] is None and row["figures"]["gpu_count"] == 0
    assert row["benchmark_status"] == {"cpu_sustained": "skipped", "disk_random_io": "ok", "gpu_sustained": "skipped",
                                       "memory_bandwidth": "ok"}
    assert row["verdict"]["primary_bottleneck"] == "memory_bandwidth"
    assert row["verdict"]["reasons"][0].startswith("host STREAM triad")
    assert row["verdict"]["actions"][0] == "Populate every memory channel evenly"
    assert row["schema_version"] == "1.0.0"


def test_gpu_figures_spread_over_measured_gpus_only():
    gpus = [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "status": "ok", "bf16_tflops": 790.0, "h2d_gbps": 54.0,
         "telemetry": {"throttle_reasons": [], "temperature_max_c": 71.0}},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "status": "ok", "bf16_tflops": 610.0, "h2d_gbps": 53.0,
         "telemetry": {"throttle_reasons": ["hw_thermal_slowdown"], "temperature_max_c": 92.0}},
        {"index": 2, "name": "NVIDIA H100 80GB HBM3", "status": "error", "message": "timed out", "bf16_tflops": None},
    ]
    result = {"schema_version": "1.0.0", "benchmarks": {"gpu_sustained": {"status": "error", "gpus": gpus}},
              "static_profile": {"gpus": [{"index": 1, "sku": "h100_sxm", "uuid": "GPU-1", "memory_total_mib": 81559}]},
              "analysis": {"primary_bottleneck": "gpu_thermal", "secondary_bottleneck": None, "confidence": 0.95,
                           "reasons": ["a", "b", "c", "d"]},
              "remediation": {"priority": "high", "actions": [{"title": "Fix GPU cooling"}]}}
    row = profile_summary(result)
    figures = row["figures"]
    assert figures["gpu_bf16_tflops"] == {"min": 610.0, "mean": 700.0, "max": 790.0}
    assert figures["gpu_h2d_gbps"] == {"min": 53.0, "mean": 53.5, "max": 54.0}
    assert figures["gpu_fp32_tflops"] is None
    assert (figures["gpu_count"], figures["gpu_measured"]) == (3, 2)
    assert figures["gpu_throttle_reasons"] == ["hw_thermal_slowdown"] and figures["gpu_temperature_max_c"] == 92.0
    assert [(g["index"], g["status"], g["sku"]) for g in row["gpus"]] == [(0, "ok", None), (1, "ok", "h100_sxm"), (2, "error", None)]
    assert [(g["uuid"], g["memory_total_mib"]) for g in row["gpus"]] == [(None, None), ("GPU-1", 81559), (None, None)]
    assert row["verdict"] == {"primary_bottleneck": "gpu_thermal", "secondary_bottleneck": None, "confidence": 0.95,
                              "priority": "high", "reasons": ["a", "b", "c"], "actions": ["Fix GPU cooling"]}


def test_something_that_is_no_profile_result_gives_none():
    assert profile_summary(None) is None
    assert profile_summary({"checks": []}) is None


def test_fallback_figures_are_kept_out_of_the_ranked_figures():
    # A host without NumPy measures the interpreter: ranking it against NumPy hosts would make it a straggler.
    result = {"schema_version": "1.0.0", "benchmarks": {
        "cpu_sustained": {"status": "fallback", "method": "stdlib_python_matmul", "single_thread_gflops": 0.02,
                          "all_cores_gflops": 0.04},
        "memory_bandwidth": {"status": "fallback", "method": "stdlib_memoryview_copy", "copy_gbps": 6.1}}}
    figures = profile_summary(result)["figures"]
    assert (figures["cpu_single_thread_gflops"], figures["cpu_all_cores_gflops"], figures["memory_copy_gbps"]) == (None, None, None)
    assert (figures["cpu_method"], figures["memory_method"]) == ("stdlib_python_matmul", "stdlib_memoryview_copy")
