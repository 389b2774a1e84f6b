"""The NumPy STREAM kernels, the 1..N thread sweep, and the worker run for real (NumPy is in the test venv)."""

import os
import subprocess
import sys

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import stream
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker

numpy = pytest.importorskip("numpy")
MIB = 1024 * 1024


def test_kernels_compute_stream_copy_and_triad_on_every_part():
    kernels = stream.StreamKernels(numpy, 1000, 3, chunk_elements=64)
    kernels.c[:] = numpy.arange(1000)
    for part in range(3):
        kernels.triad(part)
    assert numpy.array_equal(kernels.a, 1.0 + stream.TRIAD_SCALAR * numpy.arange(1000))
    kernels.a[:] = 0.0
    for part in range(3):
        kernels.triad_matmul(part)  # the fused pass: the same result
    assert numpy.array_equal(kernels.a, 1.0 + stream.TRIAD_SCALAR * numpy.arange(1000))
    for part in range(3):
        kernels.copy(part)
    assert numpy.array_equal(kernels.a, kernels.b)
    assert kernels.bytes_moved("triad") == 24000 and kernels.bytes_moved("copy") == 16000


def test_resplitting_keeps_the_arrays_and_covers_every_element():
    kernels = stream.StreamKernels(numpy, 1001, 4, chunk_elements=100)
    kernels.split(2, 300)
    assert len(kernels.parts) == 2
    assert sum(len(chunk[0]) for part in kernels.parts for chunk in part) == 1001
    kernels.c[:] = 2.0
    for part in range(2):
        kernels.triad(part)
    assert (kernels.a == 7.0).all()


@pytest.mark.parametrize("cpus, counts", [(1, [1]), (2, [1, 2]), (4, [1, 2, 3, 4]), (6, [1, 2, 3, 4, 6]),
                                          (64, [1, 2, 3, 4, 8, 16, 32, 64]), (96, [1, 2, 3, 4, 8, 16, 32, 64, 96])])
def test_thread_candidates_sweep_1_to_n(cpus, counts):
    assert stream.thread_candidates(cpus) == counts


def test_best_over_threads_keeps_the_fastest_count():
    found = stream.best_over_threads(numpy, 2 * MIB // 8, [1, 2], 0.02, 0.1)
    by_threads = found["triad_gbps_by_threads"]
    assert set(by_threads) == {"1", "2"}
    assert found["threads"] == int(max(by_threads, key=lambda count: by_threads[count]))
    assert max(found["rates"]["triad"]) == by_threads[str(found["threads"])]
    assert len(found["rates"]["triad"]) >= 3
    assert set(found["triad_gbps_by_kernel"]) == set(stream.TRIADS) and found["kernel"] in stream.TRIADS
    assert max(found["rates"]["triad"]) == found["triad_gbps_by_kernel"][found["kernel"]]


def test_a_failing_thread_is_a_stream_error():
    kernels = stream.StreamKernels(numpy, 100, 2, chunk_elements=10)
    kernels.parts[1] = [(None, None, None)]  # the second thread's triad raises
    team = stream.ThreadTeam(kernels, 2)
    with pytest.raises(stream.StreamError, match="memory benchmark thread failed"):
        team.run("triad")


def test_the_worker_measures_with_numpy_for_real():
    answer = _worker.run_worker(stream, {"array_bytes": 4 * MIB, "threads": [1, 2], "warmup_s": 0.02, "duration_s": 0.1},
                                120, "stream")
    assert answer["status"] == "ok" and answer["method"] == "numpy_blocked"
    assert answer["threads"] in (1, 2) and answer["triad_gbps"] > 0 and answer["copy_gbps"] > 0
    assert answer["triad_gbps"] == max(answer["triad_gbps_by_threads"].values())


def test_the_worker_without_numpy_answers_absent(tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    if subprocess.run([python, "-c", "import numpy"], capture_output=True, check=False).returncode == 0:
        pytest.skip("the base interpreter sees NumPy")
    answer = _worker.run_worker(stream, {"array_bytes": MIB, "threads": [1], "warmup_s": 0, "duration_s": 0}, 60, "stream",
                                python=python)
    assert answer["status"] == "absent" and "NumPy is not importable" in answer["reason"]
    assert os.path.basename(python) in answer["reason"]
