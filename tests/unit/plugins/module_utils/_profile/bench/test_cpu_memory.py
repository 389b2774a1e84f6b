"""CPU and memory benchmarks: structure and units with tiny durations (speeds are for benchmarks/, not tests)."""

import os
import shutil

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import membench
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import cpu, cpu_worker, memory
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import BenchTimeout

MIB = 1024 * 1024


def test_cpu_numpy_single_and_all_cores():
    result = cpu.run_cpu(0.05, 0.2, matrix_n=128)
    assert result["status"] == "ok" and result["method"] == "numpy_matmul"
    assert result["threads"] == len(os.sched_getaffinity(0))
    assert result["single_thread_gflops"] > 0 and result["all_cores_gflops"] > 0
    assert result["scaling_x"] == round(result["all_cores_gflops"] / result["single_thread_gflops"], 2)
    assert result["iterations_single"] >= 1 and result["matrix_n"] == 128
    assert result["numpy_version"]


def test_cpu_worker_is_killed_at_its_timeout():
    args = {"method": "stdlib", "n": 64, "stdlib_n": 64, "warmup_s": 0, "duration_s": 60}
    proc = _worker.start_worker(cpu_worker, args)
    with pytest.raises(BenchTimeout, match=r"cpu test timed out after 0.5s"):
        _worker.finish_worker(proc, 0.5, "cpu test")
    assert proc.poll() is not None  # the worker is gone, not left spinning


def test_memory_numpy_stream_figures():
    result = memory.run_memory(0.05, 0.2, array_mib=16, threads=2, method="numpy_blocked")
    assert result["status"] == "ok" and result["method"] == "numpy_blocked"
    assert result["copy_gbps"] > 0 and result["triad_gbps"] > 0
    assert result["triad_gbps"] >= result["triad_gbps_mean"]  # best of the repeats
    assert result["repeats"] >= 3 and result["threads"] == 2 and result["array_bytes"] == 16 * MIB
    assert any("below 4x the last-level cache" in note for note in result["notes"])


@pytest.mark.skipif(membench.find_compiler() is None, reason="no C compiler here")
def test_memory_is_compiled_stream_where_a_compiler_exists():
    result = memory.run_memory(0.05, 0.3, array_mib=16)
    assert result["status"] == "ok" and result["method"] == "c_stream" and result["threads"] >= 1
    assert os.path.basename(result["compiler"]) in membench.COMPILERS and isinstance(result["openmp"], bool)
    assert result["repeats"] >= 3 and result["triad_gbps"] >= result["triad_gbps_mean"] > 0 and result["copy_gbps"] > 0
    counts = usable_counts() if result["openmp"] else ["1"]
    assert sorted(result["triad_gbps_by_threads"]) == counts
    assert result["triad_gbps"] == max(result["triad_gbps_by_threads"].values())
    assert "triad_kernel" not in result and "compiled C" in result["message"]


@pytest.mark.skipif(shutil.which("gcc") is None or membench.usable_cpus() < 2, reason="needs gcc and two CPUs")
def test_a_compiler_without_openmp_leaves_the_cpus_to_numpy(tmp_path, monkeypatch):
    # clang without libomp, say: the C program would stream on one thread of N, far below the memory's bandwidth.
    cc = tmp_path / "cc"
    cc.write_text('#!/bin/sh\ncase "$*" in *-fopenmp*) echo "cc: error: unsupported option -fopenmp" >&2; exit 1;; esac\n'
                  'exec %s "$@"\n' % shutil.which("gcc"))
    cc.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    auto = memory.run_memory(0.05, 0.2, array_mib=16)
    assert auto["method"] == "numpy_blocked" and auto["threads"] >= 1
    assert any(note.startswith("compiled C STREAM not run (%s has no OpenMP" % cc) for note in auto["notes"])
    asked = memory.run_memory(0.05, 0.2, array_mib=16, method="c_stream")
    assert asked["method"] == "c_stream" and asked["openmp"] is False and asked["threads"] == 1
    assert any(note.endswith("has no OpenMP: the C triad ran on one thread of %d" % membench.usable_cpus()) for note in asked["notes"])


def usable_counts():
    return [str(count) for count in range(1, min(len(os.sched_getaffinity(0)), 4) + 1)]


def test_memory_without_a_thread_count_keeps_the_best_of_1_to_n_threads():
    result = memory.run_memory(0.05, 0.3, array_mib=16, method="numpy_blocked")
    measured = result["triad_gbps_by_threads"]
    assert sorted(int(count) for count in measured) == list(range(1, min(len(os.sched_getaffinity(0)), 4) + 1))
    assert str(result["threads"]) == max(measured, key=lambda count: measured[count])
    assert result["triad_gbps"] == max(measured.values())


def test_bench_errors_are_the_worker_errors():
    # profile catches BenchError around its benchmarks: a worker's failure must be one.
    with pytest.raises(BenchTimeout):
        raise _worker.WorkerTimeout("x")


def test_memory_with_numpy_handed_in_measures_in_this_process():
    numpy = pytest.importorskip("numpy")
    result = memory.run_memory(0.02, 0.1, array_mib=8, threads=1, numpy=numpy)
    assert result["status"] == "ok" and result["threads"] == 1 and result["triad_kernel"] in ("triad", "triad_matmul")
    assert result["triad_gbps"] == max(result["triad_gbps_by_threads"].values())
