"""The active probes: the memory probe for real (NumPy and a C compiler here), the GPU probe for real without torch,
and with fake torch interpreters replaying a worker's answer, hanging, or crashing."""

import json
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import active, catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.catalogue import PROBE_LEVELS, PROBES, collect
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import membench

MIB = 1024 * 1024
OPTIONS = {"timeouts": {"total": 120}, "torch_python": None}


def fake_python(tmp_path, body):
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def answer_line(**edits):
    answer = {"status": "ok", "torch_version": "2.5.1+cu124", "cuda_available": True, "not_run": [], "steps": [],
              "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "bf16_tflops": 781.4}], "allreduce": None}
    answer.update(edits)
    return json.dumps(answer)


def test_the_active_probes_are_registered_at_deep():
    assert PROBES["gpu_active"] is active.probe_gpu_active and PROBES["memory_active"] is active.probe_memory_active
    assert PROBE_LEVELS["gpu_active"] == PROBE_LEVELS["memory_active"] == "deep"


def test_the_deadline_is_timeouts_active_capped_by_the_time_left_of_the_run():
    assert active.active_timeout({"timeouts": {"active": 30, "total": 300}}) == 30
    assert active.active_timeout({}) == active.ACTIVE_TIMEOUT_S
    # A run's deadline caps every timeout a probe reads (probes/catalogue.collect): 100 s of total leave at most 100.
    assert _doctor.resolved_timeouts({"total": 100}, {}, "deep")["active"] == active.ACTIVE_TIMEOUT_S
    bounded = catalogue.BoundedTimeouts(_doctor.resolved_timeouts({"total": 100}, {}, "deep"), time.monotonic() + 100)
    assert active.active_timeout({"timeouts": bounded}) <= 100


def test_without_torch_the_gpu_probe_is_absent_for_real():
    try:
        import torch  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import
        pytest.skip("torch is installed here")
    except ImportError:
        pass
    with pytest.raises(ProbeAbsent, match="torch is not importable"):
        active.probe_gpu_active(OPTIONS)


def test_a_worker_answer_becomes_the_probe_data(tmp_path):
    python = fake_python(tmp_path, "echo 'torch noise on stdout'\necho '%s'\n" % answer_line())
    data = active.probe_gpu_active(dict(OPTIONS, torch_python=python))
    assert data["gpus"][0]["bf16_tflops"] == 781.4 and data["python"] == python and data["seconds"] >= 0


def test_torch_without_a_gpu_is_absent(tmp_path):
    python = fake_python(tmp_path, "echo '%s'\n" % answer_line(cuda_available=False, gpus=[]))
    with pytest.raises(ProbeAbsent, match="torch 2.5.1\\+cu124 in .* sees no GPU"):
        active.probe_gpu_active(dict(OPTIONS, torch_python=python))


def test_a_hung_worker_is_killed_at_the_deadline_and_fails(tmp_path):
    python = fake_python(tmp_path, "exec sleep 600\n")
    with pytest.raises(ProbeError, match="active GPU worker timed out after 0.5s"):
        active.probe_gpu_active({"timeouts": {"active": 0.5}, "torch_python": python})


def test_a_crashed_worker_fails_with_its_last_error_line(tmp_path):
    python = fake_python(tmp_path, "echo 'RuntimeError: CUDA driver initialization failed' >&2\nexit 1\n")
    with pytest.raises(ProbeError, match="exited with status 1: RuntimeError: CUDA driver initialization failed"):
        active.probe_gpu_active(dict(OPTIONS, torch_python=python))


def test_a_torch_python_that_is_not_a_file_is_an_error(tmp_path):
    with pytest.raises(ProbeError, match="is not an executable file"):
        active.probe_gpu_active(dict(OPTIONS, torch_python=str(tmp_path / "nope")))


def test_collect_wraps_the_outcomes_in_envelopes(tmp_path):
    envelopes = collect(["gpu_active"], dict(OPTIONS, torch_python=fake_python(tmp_path, "exit 3\n")))
    assert envelopes["gpu_active"]["status"] == "error" and "status 3" in envelopes["gpu_active"]["reason"]


@pytest.fixture
def small_arrays(monkeypatch):
    monkeypatch.setattr(membench, "choose_array_bytes", lambda llc, available: (8 * MIB, ["small arrays for the test"]))
    monkeypatch.setattr(active, "MEMORY_WARMUP_S", 0.02)
    monkeypatch.setattr(active, "MEMORY_DURATION_S", 0.1)


def test_the_memory_probe_measures_numpy_and_the_c_reference_for_real(small_arrays):
    pytest.importorskip("numpy")
    data = active.probe_memory_active(OPTIONS)
    assert data["numpy"]["status"] == "ok" and data["numpy"]["triad_gbps"] > 0
    assert data["array_bytes"] == 8 * MIB and data["notes"] == ["small arrays for the test"]
    if membench.find_compiler() is None:
        assert data["c_reference"] is None and "no C compiler" in data["c_reference_reason"]
    else:
        assert data["c_reference"]["triad_gbps"] > 0 and data["c_reference_reason"] is None


def test_the_memory_probe_without_a_compiler_keeps_the_numpy_figure(small_arrays, monkeypatch):
    pytest.importorskip("numpy")
    monkeypatch.setattr(membench, "find_compiler", lambda: None)
    data = active.probe_memory_active(OPTIONS)
    assert data["numpy"]["triad_gbps"] > 0
    assert data["c_reference"] is None and data["c_reference_reason"] == "no C compiler (cc, gcc, clang) on PATH"


def test_the_memory_probe_without_numpy_is_absent(small_arrays, tmp_path):
    python = fake_python(tmp_path, "echo '{\"status\": \"absent\", \"reason\": \"NumPy is not importable by x\"}'\n")
    with pytest.raises(ProbeAbsent, match="NumPy is not importable by x"):
        active.probe_memory_active(OPTIONS, python=python)
