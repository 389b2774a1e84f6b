"""No NumPy, no torch, no C compiler: labelled fallbacks or SKIP, never a crash, in a real interpreter that lacks them."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import REPO

COLLECTIONS = os.path.join(REPO, "collections")


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A fresh virtualenv without site packages: the standard library only, like a bare target host."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    probe = subprocess.run([python, "-c", "import numpy"], capture_output=True, text=True, check=False)
    assert probe.returncode != 0, "the bare interpreter must not see NumPy"
    return python


def run_bare(python, body, tmp_path):
    """body run by the bare interpreter with an empty PATH: no compiler either, like a bare target host."""
    code = "import json, sys\n" + textwrap.dedent(body)
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, PYTHONPATH=COLLECTIONS, PATH=str(empty)))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_memory_falls_back_to_a_labelled_stdlib_copy(bare_python, tmp_path):
    result = run_bare(bare_python, """
        from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import memory
        print(json.dumps(memory.run_memory(0.05, 0.2, array_mib=16)))
    """, tmp_path)
    assert result["status"] == "fallback" and result["method"] == "stdlib_memoryview_copy"
    assert result["copy_gbps"] > 0 and result["triad_gbps"] is None and result["threads"] == 1
    assert any(note.startswith("compiled C STREAM not run (no C compiler") for note in result["notes"])
    assert any("NumPy is not importable" in note for note in result["notes"])


@pytest.mark.parametrize("method, reason", [("c_stream", "compiled C STREAM: no C compiler"),
                                            ("numpy_blocked", "NumPy is not importable")])
def test_a_memory_method_asked_for_fails_when_it_cannot_run(bare_python, tmp_path, method, reason):
    result = run_bare(bare_python, """
        from ansible_collections.continuum.hydra.plugins.module_utils._profile import run as profile
        result = profile.run(benchmarks=["memory"], warmup_s=0.05, duration_s=0.1, sample_interval_s=0.05,
                             benchmark_options={"memory": {"array_mib": 16, "method": %r}})
        print(json.dumps(result["benchmarks"]["memory_bandwidth"]))
    """ % method, tmp_path)
    assert result["status"] == "error" and result["message"].startswith(reason)  # never the stdlib copy in its place


def test_cpu_falls_back_to_a_labelled_pure_python_loop(bare_python, tmp_path):
    result = run_bare(bare_python, """
        from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import cpu
        print(json.dumps(cpu.run_cpu(0.05, 0.2, stdlib_n=24)))
    """, tmp_path)
    assert result["status"] == "fallback" and result["method"] == "stdlib_python"
    assert result["single_thread_gflops"] > 0 and result["all_cores_gflops"] > 0
    assert result["threads"] == len(os.sched_getaffinity(0)) and result["numpy_version"] is None
    assert any("NumPy is not importable" in note for note in result["notes"])


def test_whole_profile_without_numpy_or_torch_reports_and_does_not_judge_fallbacks(bare_python, tmp_path):
    result = run_bare(bare_python, """
        from ansible_collections.continuum.hydra.plugins.module_utils._profile import run as profile
        result = profile.run(benchmarks=["cpu", "memory", "gpu"], warmup_s=0.05, duration_s=0.1, sample_interval_s=0.05,
                              benchmark_options={"memory": {"array_mib": 16}})
        print(json.dumps(result))
    """, tmp_path)
    assert result["static_profile"]["runtime"]["numpy_version"] is None
    assert result["static_profile"]["runtime"]["torch_version"] is None
    benches = result["benchmarks"]
    assert (benches["cpu_sustained"]["status"], benches["memory_bandwidth"]["status"], benches["gpu_sustained"]["status"]) == (
        "fallback", "fallback", "skipped")
    assert benches["gpu_sustained"]["message"].startswith("torch is not installed for")
    statuses = dict((row["name"], row["status"]) for row in result["benchmark_results"])
    assert statuses["memory_bandwidth.copy_gbps"] == "WARN" and statuses["gpu_sustained.bf16_tflops"] == "SKIP"
    notes = result["analysis"]["notes"]
    assert any(note.startswith("host memory bandwidth not judged") for note in notes)
    assert any(note.startswith("CPU throughput not judged") for note in notes)
