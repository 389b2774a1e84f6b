"""The idle guard's reading: squeue's recorded output, GPU processes from nvidia-smi and the KFD tree, what is unread.

squeue and nvidia-smi are replayed from real recordings (tests/fixtures/slurm/, the documented compute-apps CSV); the
real squeue against real daemons is tests/integration/test_screening.py.
"""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import idle
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import HOLDING_STATES, node_jobs_args, parse_node_jobs
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture


def _script(directory, name, body):
    path = os.path.join(str(directory), name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


def _squeue(directory, stdout_fixture=None, stderr_fixture=None, rc=0):
    """A squeue that checks its arguments and replays a recording of the real one."""
    out = "cat '%s'\n" % fixture_path("slurm", stdout_fixture) if stdout_fixture else ""
    err = "cat '%s' >&2\n" % fixture_path("slurm", stderr_fixture) if stderr_fixture else ""
    expected = " ".join(node_jobs_args("node2"))
    return _script(directory, "squeue", 'test "$*" = "%s" || { echo "unexpected: $*" >&2; exit 99; }\n%s%sexit %d\n'
                   % (expected, out, err, rc))


def test_the_recorded_listing_keeps_a_job_name_with_the_separator():
    jobs = parse_node_jobs(read_fixture("slurm", "squeue-22.05-node2-running.txt"))
    assert jobs == [{"id": "4", "state": "RUNNING", "user": "root", "name": "train|llama 70b"}]
    assert parse_node_jobs("") == [] and parse_node_jobs("garbage\n") == []
    assert node_jobs_args("node2")[:5] == ["-h", "-w", "node2", "-t", ",".join(HOLDING_STATES)]


def test_slurm_jobs_leave_out_the_job_doctor_runs_in(tmp_path):
    squeue = _squeue(tmp_path, "squeue-22.05-node2-running.txt")
    assert idle.slurm_jobs("node2", 5, squeue_path=squeue)["jobs"][0]["id"] == "4"
    assert idle.slurm_jobs("node2", 5, own_job="4", squeue_path=squeue) == {"node": "node2", "jobs": [], "own_job": "4"}


def test_a_host_of_no_cluster_is_not_a_slurm_node_but_a_failing_squeue_is_unread(tmp_path):
    unconfigured = _squeue(tmp_path, stderr_fixture="squeue-22.05-no-configuration.stderr", rc=1)
    assert idle.slurm_jobs("node2", 5, squeue_path=unconfigured) is None
    unknown = _squeue(tmp_path, stderr_fixture="squeue-22.05-invalid-node.stderr", rc=1)
    with pytest.raises(ProbeError, match=r"squeue -w node2: rc 1: squeue: error: Invalid node name node9"):
        idle.slurm_jobs("node2", 5, squeue_path=unknown)
    with pytest.raises(ProbeError, match="is not an executable file"):
        idle.slurm_jobs("node2", 5, squeue_path=str(tmp_path / "missing"))


def test_kfd_processes_are_the_pids_under_the_kfd_tree(tmp_path):
    tree = tmp_path / "kfd" / "proc"
    for pid in ("1234", "77", "not-a-pid"):
        (tree / pid).mkdir(parents=True)
    assert [proc["pid"] for proc in idle.kfd_processes(5, str(tree))] == [1234, 77]
    assert idle.kfd_processes(5, str(tmp_path / "none")) == []


def test_read_idle_names_every_occupant_and_what_it_could_not_read(tmp_path):
    smi = _script(tmp_path, "nvidia-smi", "echo '41234, GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e, 30512'\n")
    squeue = _squeue(tmp_path, "squeue-22.05-node2-running.txt")
    reading = idle.read_idle(smi, 5, "node2", own_job="", squeue_path=squeue, kfd_dir=str(tmp_path / "no-kfd"), environ={})
    assert reading["unconfirmed"] == []
    assert idle.occupants(reading) == ["SLURM job 4 (train|llama 70b, user root, running)",
                                       "GPU process 41234 on GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e"]
    broken = _script(tmp_path / "..", "nvidia-smi-broken", "echo 'NVIDIA-SMI has failed' >&2; exit 9\n")
    reading = idle.read_idle(broken, 5, "node2", squeue_path=squeue, kfd_dir=str(tmp_path / "no-kfd"),
                             environ={"SLURM_JOB_ID": "4"})
    assert reading["slurm"]["jobs"] == [] and reading["gpu_processes"] == []
    assert len(reading["unconfirmed"]) == 1 and "nvidia-smi --query-compute-apps: " in reading["unconfirmed"][0]


def test_the_node_name_is_the_given_one_else_slurmd_nodename_else_the_short_host_name():
    assert idle.node_name("gpu-a01", {"SLURMD_NODENAME": "x"}) == "gpu-a01"
    assert idle.node_name(None, {"SLURMD_NODENAME": "node7"}) == "node7"
    assert idle.node_name(None, {}) and "." not in idle.node_name(None, {})


def test_the_guard_refuses_a_busy_node_naming_what_holds_it_and_force_loads_it_saying_what_it_overrode(tmp_path):
    smi = _script(tmp_path, "nvidia-smi", "echo '41234, GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e, 30512'\n")
    squeue = _squeue(tmp_path, "squeue-22.05-node2-running.txt")
    common = dict(nvidia_smi_path=smi, squeue_path=squeue, kfd_dir=str(tmp_path / "no-kfd"), environ={})
    held = idle.guard("node2", **common)
    assert held["node"] == "node2" and held["forced"] is None
    assert held["refused"] == ("node busy (SLURM job 4 (train|llama 70b, user root, running); GPU process 41234 on "
                               "GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e); force: true loads it anyway")
    forced = idle.guard("node2", force=True, **common)
    assert forced["refused"] is None and forced["forced"].startswith("node busy (SLURM job 4 ")
    idle_dir = tmp_path / "idle"
    idle_dir.mkdir()
    free = idle.guard("node2", nvidia_smi_path=_script(idle_dir, "nvidia-smi", "exit 0\n"), squeue_path=_squeue(idle_dir),
                      kfd_dir=str(tmp_path / "no-kfd"), environ={})
    assert (free["occupants"], free["unconfirmed"], free["refused"], free["forced"]) == ([], [], None, None)


def test_the_guard_never_takes_what_it_could_not_read_for_idle(tmp_path):
    unknown = _squeue(tmp_path, stderr_fixture="squeue-22.05-invalid-node.stderr", rc=1)
    missing = str(tmp_path / "no-such-nvidia-smi")
    held = idle.guard("node2", nvidia_smi_path=missing, squeue_path=unknown, kfd_dir=str(tmp_path / "no-kfd"), environ={})
    assert held["occupants"] == [] and len(held["unconfirmed"]) == 2
    assert held["refused"].startswith("cannot confirm the node is idle: nvidia-smi --query-compute-apps: nvidia_smi_path ")
    assert "Invalid node name node9" in held["refused"] and held["refused"].endswith("; force: true loads it anyway")


def test_a_process_line_nvidia_smi_could_not_read_leaves_the_node_unconfirmed_not_idle(tmp_path):
    # The documented compute-apps line with its pid field as nvidia-smi prints a field the caller may not read
    # (gpus/compute_apps.py cites real outputs): unreadable is not idle.
    smi = _script(tmp_path, "nvidia-smi", "echo '[Insufficient Permissions], GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e, [N/A]'\n")
    squeue = _squeue(tmp_path)
    reading = idle.read_idle(smi, 5, "node2", own_job="", squeue_path=squeue, kfd_dir=str(tmp_path / "no-kfd"), environ={})
    assert reading["gpu_processes"] == []
    assert reading["unconfirmed"] == [
        "nvidia-smi --query-compute-apps: 1 unreadable process line skipped (line 1: pid '[Insufficient Permissions]' is "
        "not a process id): a process it cannot read may hold a GPU"]
    held = idle.guard("node2", nvidia_smi_path=smi, squeue_path=squeue, kfd_dir=str(tmp_path / "no-kfd"), environ={})
    assert held["refused"].startswith("cannot confirm the node is idle: nvidia-smi --query-compute-apps: 1 unreadable ")
    assert idle.guard("node2", force=True, nvidia_smi_path=smi, squeue_path=squeue, kfd_dir=str(tmp_path / "no-kfd"),
                      environ={})["refused"] is None
