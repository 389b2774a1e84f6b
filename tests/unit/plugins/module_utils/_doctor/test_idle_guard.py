"""doctor's idle guard (issue 27 item 1): at level deep no active probe runs on a node a job or a GPU process occupies.

A doctor run with the probe table of tests/support/doctor_probes.py: the guard's reading is planted, each active
probe records whether it was called. The guard against real slurmd jobs is tests/integration/test_screening.py.
"""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor_run
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.tests.support.doctor_probes import probe_table

JOB = {"id": "812", "state": "RUNNING", "user": "alice", "name": "train"}


def _reading(jobs=(), processes=(), unconfirmed=(), force=False):
    return {"gpu_processes": list(processes), "slurm": {"node": "node1", "jobs": list(jobs), "own_job": None},
            "unconfirmed": list(unconfirmed), "node": "node1", "force": force}


def _run(guard, force=False):
    called = []

    def active(name):
        def probe(options):
            called.append(name)
            return {"numpy": {"triad_gbps": 40.0, "threads": 2}, "c_reference": {"triad_gbps": 42.0, "threads": 2}}
        return probe
    table = probe_table(node_idle=guard, memory_active=active("memory_active"), gpu_active=active("gpu_active"))
    result = doctor_run.run(probes=table, level="deep", only=["system.node_idle", "system.memory_bandwidth"], force=force)
    return dict((chk["id"], chk) for chk in result["checks"]), called


def test_every_deep_probe_but_the_guard_is_guarded():
    assert set(probe_catalogue.ACTIVE_PROBES) == {"dcgm_diag", "rvs", "gpu_active", "memory_active"}
    assert probe_catalogue.probe_level(probe_catalogue.GUARD) == "deep"


def test_an_idle_node_is_loaded():
    checks, called = _run(lambda options: _reading())
    assert called == ["memory_active"]
    assert checks["system.node_idle"]["status"] == "PASS"
    assert checks["system.memory_bandwidth"]["status"] == "PASS"


def test_a_node_a_job_holds_is_not_loaded_and_the_checks_say_why():
    checks, called = _run(lambda options: _reading(jobs=[JOB]))
    assert called == []
    guard = checks["system.node_idle"]
    assert guard["status"] == "SKIP"
    assert guard["message"] == "node node1 is busy (SLURM job 812 (train, user alice, running)): the active checks were not run"
    memory = checks["system.memory_bandwidth"]
    assert memory["status"] == "SKIP"
    assert memory["message"] == "not run: node busy (SLURM job 812 (train, user alice, running)); force: true runs it anyway"


def test_a_gpu_process_alone_keeps_the_node_busy():
    checks, called = _run(lambda options: _reading(processes=[{"pid": 41234, "gpu": "GPU-5d2e", "used_memory_mib": 30512,
                                                               "source": "nvidia-smi"}]))
    assert called == [] and "GPU process 41234 on GPU-5d2e" in checks["system.node_idle"]["message"]


def test_a_node_that_cannot_be_read_is_not_loaded_and_its_guard_errs():
    def unread(options):
        raise ProbeError("cannot confirm the node is idle: SLURM jobs of node node1: squeue -w node1: rc 1: slurm_load_jobs error")
    checks, called = _run(unread)
    assert called == []
    assert checks["system.node_idle"]["status"] == "ERROR"
    assert checks["system.memory_bandwidth"]["status"] == "SKIP"
    assert checks["system.memory_bandwidth"]["message"].startswith("not run: cannot confirm the node is idle: SLURM jobs")


@pytest.mark.parametrize("reading", [_reading(jobs=[JOB], force=True), _reading(unconfirmed=["nvidia-smi: rc 9"], force=True)])
def test_force_loads_a_busy_or_unread_node_and_says_so(reading):
    checks, called = _run(lambda options: reading, force=True)
    assert called == ["memory_active"]
    guard = checks["system.node_idle"]
    assert guard["status"] == "WARN" and guard["message"].startswith("force: the active checks ran on node node1 although ")


def recording(order, name, value):
    def probe(options):
        order.append(name)
        return value() if callable(value) else value
    return probe


def test_the_guard_reads_the_node_right_before_each_active_probe_and_only_at_level_deep():
    order = []
    table = probe_table(node_idle=recording(order, "node_idle", _reading()), memory_active=recording(order, "memory_active", {}),
                        dcgm_diag=recording(order, "dcgm_diag", {}), kernel_log=recording(order, "kernel_log", {}))
    doctor_run.run(probes=table, level="deep", only=["gpu.dcgm_diag", "system.memory_bandwidth", "gpu.xid_errors"])
    # The passive probes first; then each active probe right after a reading of the guard.
    assert order[0] == "kernel_log" and order[1::2] == ["node_idle", "node_idle"]
    assert sorted(order[2::2]) == ["dcgm_diag", "memory_active"]
    order.clear()
    doctor_run.run(probes=table, level="standard")
    assert order == ["kernel_log"]  # no guard, no active probe


def test_a_node_that_becomes_busy_during_the_active_probes_is_not_loaded_further():
    # A job scheduled while the DCGM diagnostic ran: the guard's second reading finds it, the next active probe does
    # not run, and the guard's check says so (never PASS: the node was not wholly screened).
    order = []
    readings = iter([_reading(), _reading(jobs=[JOB])])
    table = probe_table(node_idle=recording(order, "node_idle", lambda: next(readings)),
                        memory_active=recording(order, "memory_active", {}), dcgm_diag=recording(order, "dcgm_diag", {}))
    result = doctor_run.run(probes=table, level="deep", only=["gpu.dcgm_diag", "system.memory_bandwidth", "system.node_idle"])
    checks = dict((chk["id"], chk) for chk in result["checks"])
    first, second = order[1], ("memory_active" if order[1] == "dcgm_diag" else "dcgm_diag")
    assert order == ["node_idle", first, "node_idle"]
    held = checks["system.memory_bandwidth" if second == "memory_active" else "gpu.dcgm_diag"]
    assert held["status"] == "SKIP"
    assert held["message"] == ("not run: node busy, found before probe %s (SLURM job 812 (train, user alice, running)); "
                               "force: true runs it anyway" % second)
    guard = checks["system.node_idle"]
    assert guard["status"] == "SKIP"
    assert guard["message"] == ("node node1 became busy before probe %s (SLURM job 812 (train, user alice, running)): it and "
                                "the active probes after it were not run" % second)
    assert guard["details"]["rechecks"][0]["before"] == second


def test_a_reading_that_fails_during_the_active_probes_holds_the_rest_and_the_guard_errs():
    order = []
    calls = []

    def guard(options):
        calls.append(1)
        if len(calls) > 1:
            raise ProbeError("cannot confirm the node is idle: SLURM jobs of node node1: squeue -w node1: rc 1: timed out")
        return _reading()
    table = probe_table(node_idle=guard, memory_active=recording(order, "memory_active", {}), dcgm_diag=recording(order, "dcgm_diag", {}))
    result = doctor_run.run(probes=table, level="deep", only=["gpu.dcgm_diag", "system.memory_bandwidth", "system.node_idle"])
    checks = dict((chk["id"], chk) for chk in result["checks"])
    assert len(order) == 1 and len(calls) == 2
    guard_check = checks["system.node_idle"]
    assert guard_check["status"] == "ERROR" and guard_check["message"].startswith("node node1 could not be read before probe ")
    assert "squeue -w node1: rc 1: timed out" in guard_check["message"]
