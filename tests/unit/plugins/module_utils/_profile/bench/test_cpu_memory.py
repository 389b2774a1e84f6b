"""CPU and memory benchmarks: structure and units with tiny durations (speeds are for benchmarks/, not tests)."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import cpu, cpu_worker, memory
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import worker as _worker
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import BenchError, BenchTimeout

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


def test_worker_answers_are_checked():
    with pytest.raises(BenchError, match=r"w exited with status 1: ImportError: boom"):
        _worker.parse_answer(1, "", "Traceback...\nImportError: boom\n", "w")
    with pytest.raises(BenchError, match=r"w printed no JSON result: 'hello'"):
        _worker.parse_answer(0, "hello\n", "", "w")
    with pytest.raises(BenchError, match=r"w printed no result"):
        _worker.parse_answer(0, "\n", "", "w")
    assert _worker.parse_answer(0, "noise\n{\"gflops\": 1.5}\n", "", "w") == {"gflops": 1.5}


def test_memory_numpy_stream_figures():
    result = memory.run_memory(0.05, 0.2, array_mib=16, threads=2)
    assert result["status"] == "ok" and result["method"] == "numpy_blocked"
    assert result["copy_gbps"] > 0 and result["triad_gbps"] > 0
    assert result["triad_gbps"] >= result["triad_gbps_mean"]  # best of the repeats
    assert result["repeats"] >= 3 and result["threads"] == 2 and result["array_bytes"] == 16 * MIB
    assert any("below 4x the last-level cache" in note for note in result["notes"])


def test_memory_kernels_compute_stream_copy_and_triad():
    numpy = pytest.importorskip("numpy")
    kernels = memory.StreamKernels(numpy, 1000, 3, chunk_elements=64)
    kernels.c[:] = numpy.arange(1000)
    for part in range(3):
        kernels.triad(part)
    assert numpy.array_equal(kernels.a, 1.0 + memory.TRIAD_SCALAR * numpy.arange(1000))
    for part in range(3):
        kernels.copy(part)
    assert numpy.array_equal(kernels.a, kernels.b)
    assert kernels.bytes_moved("triad") == 24000 and kernels.bytes_moved("copy") == 16000


def test_array_size_follows_the_stream_rule():
    assert memory.choose_array_bytes(32 * MIB, 64 * 1024 * MIB) == (128 * MIB, [])
    assert memory.choose_array_bytes(None, None)[0] == 128 * MIB  # unknown LLC: 32 MiB assumed
    size, notes = memory.choose_array_bytes(1024 * MIB, 6 * 1024 * MIB)  # 4 GiB arrays would not fit
    assert size == 1024 * MIB and len(notes) == 2


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def test_last_level_cache_is_summed_over_distinct_caches(tmp_path):
    for cpu_id, shared in ((0, "0-1"), (1, "0-1"), (2, "2-3"), (3, "2-3")):
        base = str(tmp_path / ("sys/devices/system/cpu/cpu%d/cache" % cpu_id))
        for index, (level, kind, size, share) in enumerate(((1, "Instruction", "32K", str(cpu_id)),
                                                            (1, "Data", "48K", str(cpu_id)),
                                                            (3, "Unified", "32768K", shared))):
            for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", share)):
                write(os.path.join(base, "index%d" % index, name), "%s\n" % value)
    assert memory.last_level_cache_bytes(str(tmp_path)) == 64 * MIB  # two L3s of 32 MiB, counted once each
    assert memory.last_level_cache_bytes(str(tmp_path / "nothing")) is None
