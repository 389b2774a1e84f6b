"""The fleet figures: which number a host and a GPU have for each metric, and what the metric's unit says."""

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import figures
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.profile_summary import profile_summary


@pytest.mark.parametrize("metric, lower", [
    ("read_latency_us", True), ("step_time_ms", True), ("allreduce_latency", True), ("disk_read_p99_us", True),
    ("triad_gbps", False), ("read_iops", False), ("bf16_tflops", False), ("samples_per_s", False),
    ("cpu_gflops_all_cores", False)])
def test_metric_names_say_which_way_is_better(metric, lower):
    assert figures.lower_is_better(metric) is lower


@pytest.mark.parametrize("metric, judged", [
    ("memory_triad_gbps", True), ("disk_read_iops", True), ("tokens_per_s", True), ("disk_read_p99_us", True),
    ("gpu_temperature_max_c", False), ("gpu_count", False), ("gpu_measured", False), ("cpu_method", False)])
def test_only_rates_and_times_are_compared(metric, judged):
    assert figures.is_performance_metric(metric) is judged


def test_every_figure_the_profile_summary_shows_is_named_with_its_unit():
    # The comparable host figures end with a rate or time unit; the labels (method, O_DIRECT) are not compared.
    compared = [name for name, _benchmark, _path, method in figures.HOST_FIGURES if figures.is_performance_metric(name)]
    assert compared == ["cpu_single_thread_gflops", "cpu_all_cores_gflops", "memory_triad_gbps", "memory_copy_gbps",
                        "memory_numpy_triad_gbps", "memory_numpy_copy_gbps", "disk_read_iops", "disk_read_p99_us", "disk_seq_read_mbps", "disk_seq_write_mbps"]
    assert all(figures.is_performance_metric(name) for name in figures.GPU_FIGURES)
    assert [name for name in compared if figures.lower_is_better(name)] == ["disk_read_p99_us"]


@pytest.mark.parametrize("value, expected", [
    (3, 3.0), (2.5, 2.5), (True, None), (None, None), ("12", None), (float("nan"), None), (float("inf"), None)])
def test_number_keeps_finite_numbers_only(value, expected):
    assert figures.number(value) == expected


def _profile(cpu_method="numpy_matmul", memory_method="c_stream"):
    return {"schema_version": "1.0.0", "static_profile": {"gpus": []}, "benchmarks": {
        "cpu_sustained": {"status": "ok", "method": cpu_method, "single_thread_gflops": 40.0, "all_cores_gflops": 900.0},
        "memory_bandwidth": {"status": "ok", "method": memory_method, "triad_gbps": 150.0, "copy_gbps": 140.0},
        "disk_random_io": {"status": "ok", "read_iops": 250000.0, "read_latency_us": {"p50": 80.0, "p99": 410.0},
                           "seq_read_mbps": 2900.0, "seq_write_mbps": 2100.0, "o_direct": True},
    }}


def test_profile_figures_follow_the_table_in_order():
    out = figures.profile_figures(_profile())
    assert list(out) == [name for name, _benchmark, _path, _method in figures.HOST_FIGURES]
    assert out == {"cpu_single_thread_gflops": 40.0, "cpu_all_cores_gflops": 900.0, "cpu_method": "numpy_matmul",
                   "memory_triad_gbps": 150.0, "memory_copy_gbps": 140.0, "memory_numpy_triad_gbps": None,
                   "memory_numpy_copy_gbps": None, "memory_method": "c_stream",
                   "disk_read_iops": 250000.0, "disk_read_p99_us": 410.0, "disk_seq_read_mbps": 2900.0,
                   "disk_seq_write_mbps": 2100.0, "disk_o_direct": True}


def test_a_fallback_method_is_not_a_figure_but_its_name_is_kept():
    out = figures.profile_figures(_profile(cpu_method="stdlib_python", memory_method="stdlib_array"))
    assert out["cpu_all_cores_gflops"] is None and out["cpu_single_thread_gflops"] is None and out["cpu_method"] == "stdlib_python"
    assert out["memory_triad_gbps"] is None and out["memory_copy_gbps"] is None and out["memory_method"] == "stdlib_array"
    assert out["disk_read_iops"] == 250000.0  # the disk has no fallback


def test_memory_figures_of_numpy_have_their_own_names():
    # NumPy's triad reaches 0.7-1.0x of compiled STREAM's: ranked together, NumPy hosts would read as stragglers.
    out = figures.profile_figures(_profile(memory_method="numpy_blocked"))
    assert (out["memory_numpy_triad_gbps"], out["memory_numpy_copy_gbps"]) == (150.0, 140.0)
    assert out["memory_triad_gbps"] is None and out["memory_copy_gbps"] is None and out["memory_method"] == "numpy_blocked"


def test_missing_benchmarks_give_none_not_an_error():
    assert set(figures.profile_figures({"benchmarks": {"disk_random_io": "not a result"}}).values()) == {None}
    assert figures.benchmark({"benchmarks": {}}, "cpu_sustained") == {}


def test_host_figures_are_the_comparable_numbers_of_a_summary():
    summary = profile_summary(_profile())
    assert figures.host_figures(summary) == {
        "cpu_single_thread_gflops": 40.0, "cpu_all_cores_gflops": 900.0, "memory_triad_gbps": 150.0,
        "memory_copy_gbps": 140.0, "disk_read_iops": 250000.0, "disk_read_p99_us": 410.0,
        "disk_seq_read_mbps": 2900.0, "disk_seq_write_mbps": 2100.0}
    assert figures.host_figures(None) == {} and figures.host_figures({"figures": "broken"}) == {}


def test_gpu_figures_from_the_record_or_its_figures():
    on_record = {"index": 0, "bf16_tflops": 700, "h2d_gbps": None, "temperature_max_c": 71, "name": "H100"}
    nested = {"index": 1, "bf16_tflops": 1.0, "figures": {"bf16_tflops": 650.0, "hbm_gbps": 3000, "count": 3}}
    assert figures.gpu_figures(on_record) == {"bf16_tflops": 700.0}
    assert figures.gpu_figures(nested) == {"bf16_tflops": 650.0, "hbm_gbps": 3000.0}  # figures win over the record
    assert figures.gpu_records({"gpus": [on_record, "junk", None, nested]}) == [on_record, nested]
    assert figures.gpu_records(None) == [] and figures.gpu_records({"gpus": None}) == []


def test_gpu_rows_and_spreads():
    entry = {"index": 0, "status": "ok", "bf16_tflops": 700.0, "h2d_gbps": 50.0, "notes": []}
    row = figures.gpu_figure_row(entry)
    assert row == {"bf16_tflops": 700.0, "fp16_tflops": None, "fp32_tflops": None, "h2d_gbps": 50.0, "d2h_gbps": None,
                   "memory_bandwidth_gbps": None}
    spreads = figures.gpu_spreads([row, dict(row, bf16_tflops=600.0, h2d_gbps=None)])
    assert list(spreads) == ["gpu_" + name for name in figures.GPU_FIGURES]
    assert spreads["gpu_bf16_tflops"] == {"min": 600.0, "mean": 650.0, "max": 700.0}
    assert spreads["gpu_h2d_gbps"] == {"min": 50.0, "mean": 50.0, "max": 50.0}
    assert spreads["gpu_fp32_tflops"] is None
    assert figures.spread([1.0, None, 2.0]) == {"min": 1.0, "mean": 1.5, "max": 2.0} and figures.spread([]) is None
