"""Screening on the scheduler's terms (issue 27), against a real slurmctld and 3 slurmd (tests/utils/slurm_cluster.sh).

A busy node is a node a real job holds (`sbatch -w nodeN --wrap 'sleep ...'`, running under slurmd). The hosts are
local-connection inventory hosts with a fake nvidia-smi replaying a real recording and a fake dcgmi replaying a real
`dcgmi diag -j` recording that notes each call: whether the active checks loaded a node is whether dcgmi was called.
"""

import json
import os
import subprocess
import time

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import PERSISTENCE_ON, fixture, host_vars, plant, run_playbook, write_host_bin
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path
from ansible_collections.continuum.hydra.tests.support.slurm_cluster import running_cluster

pytestmark = pytest.mark.integration

NODES = {"gpu-a": "node1", "gpu-b": "node2", "gpu-c": "node3"}
DCGM_HEALTHY = fixture_path("dcgm-diag", "virtualclient", "t4-dcgm31-r2-healthy.json")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(str(tmp_path_factory.mktemp("slurm")), len(NODES)) as conf:
        yield conf


def slurm(conf, *argv):
    proc = subprocess.run(list(argv), env=dict(os.environ, SLURM_CONF=conf), capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 0, "%s: %s" % (" ".join(argv), proc.stderr)
    return proc.stdout.strip()


def occupy(conf, node, seconds=600):
    """A user's job on the node, running (not pending) when this returns; its job id."""
    job = slurm(conf, "sbatch", "--parsable", "-w", node, "-J", "user-train", "-o", "/dev/null", "--wrap", "sleep %d" % seconds)
    for _ in range(150):
        if slurm(conf, "squeue", "-h", "-j", job, "-o", "%T") == "RUNNING":
            return job
        time.sleep(0.2)
    raise AssertionError("job %s on %s did not start" % (job, node))


def release(conf, job):
    subprocess.run(["scancel", job], env=dict(os.environ, SLURM_CONF=conf), timeout=30, check=False)
    for _ in range(150):
        if not slurm(conf, "squeue", "-h", "-j", job, "-o", "%T"):
            return
        time.sleep(0.2)


def node_host(root, host, conf, **extra):
    """A host with a recorded T4 (persistence on), a fake dcgmi noting its calls and the cluster's SLURM_CONF."""
    bindir = write_host_bin(root, host, plant(fixture("tesla-t4.xml"), PERSISTENCE_ON))
    calls = os.path.join(root, host, "dcgmi.calls")
    with open(os.path.join(bindir, "dcgmi"), "w") as handle:
        handle.write("#!/bin/sh\necho \"$@\" >> '%s'\ncat '%s'\n" % (calls, DCGM_HEALTHY))
    os.chmod(os.path.join(bindir, "dcgmi"), 0o755)
    values = host_vars(bindir, hydra_slurm_node=NODES[host], **extra)
    values["hydra_environment"] = dict(values["hydra_environment"], SLURM_CONF=conf)
    return values


def dcgmi_called(root, host):
    return os.path.exists(os.path.join(root, host, "dcgmi.calls"))


def checks_of(report, host):
    return dict((chk["id"], chk) for chk in report["hosts"][host]["doctor"]["checks"])


def test_deep_doctor_never_loads_a_node_a_job_holds(cluster, tmp_path):
    root = str(tmp_path)
    job = occupy(cluster, "node1")
    try:
        hosts = dict((host, node_host(root, host, cluster)) for host in ("gpu-a", "gpu-b"))
        proc, report = run_playbook({"all": {"hosts": hosts}}, root, {
            "hydra_level": "deep", "hydra_only": ["gpu.dcgm_diag", "system.node_idle"]})
    finally:
        release(cluster, job)
    assert report is not None, proc.stdout[-4000:] + proc.stderr[-4000:]
    busy, free = checks_of(report, "gpu-a"), checks_of(report, "gpu-b")
    # node1: the user's job is named, dcgmi never ran.
    assert busy["system.node_idle"]["status"] == "SKIP", busy["system.node_idle"]
    assert "SLURM job %s (user-train, user root, running)" % job in busy["system.node_idle"]["message"]
    assert busy["gpu.dcgm_diag"]["status"] == "SKIP"
    assert busy["gpu.dcgm_diag"]["message"].startswith("not run: node busy (SLURM job %s " % job)
    assert not dcgmi_called(root, "gpu-a")
    # node2: idle, so the diagnostic ran.
    assert free["system.node_idle"]["status"] == "PASS", free["system.node_idle"]
    assert free["gpu.dcgm_diag"]["status"] == "PASS", free["gpu.dcgm_diag"]
    assert dcgmi_called(root, "gpu-b")
    assert report["hosts"]["gpu-a"]["status"] == "healthy"  # busy is not a fault of the node


def test_force_loads_the_busy_node_and_says_so(cluster, tmp_path):
    root = str(tmp_path)
    job = occupy(cluster, "node1")
    try:
        hosts = {"gpu-a": node_host(root, "gpu-a", cluster, hydra_force=True)}
        proc, report = run_playbook({"all": {"hosts": hosts}}, root, {
            "hydra_level": "deep", "hydra_only": ["gpu.dcgm_diag", "system.node_idle"]})
    finally:
        release(cluster, job)
    assert report is not None, proc.stdout[-4000:] + proc.stderr[-4000:]
    guard = checks_of(report, "gpu-a")["system.node_idle"]
    assert guard["status"] == "WARN" and "SLURM job %s" % job in guard["message"]
    assert dcgmi_called(root, "gpu-a")


def test_a_node_slurmctld_does_not_know_is_not_loaded(cluster, tmp_path):
    root = str(tmp_path)
    hosts = {"gpu-a": node_host(root, "gpu-a", cluster)}
    hosts["gpu-a"]["hydra_slurm_node"] = "node9"
    proc, report = run_playbook({"all": {"hosts": hosts}}, root, {
        "hydra_level": "deep", "hydra_only": ["gpu.dcgm_diag", "system.node_idle"]})
    assert report is not None, proc.stdout[-4000:] + proc.stderr[-4000:]
    checks = checks_of(report, "gpu-a")
    assert checks["system.node_idle"]["status"] == "ERROR"
    assert "Invalid node name node9" in checks["system.node_idle"]["message"]
    assert checks["gpu.dcgm_diag"]["status"] == "SKIP" and not dcgmi_called(root, "gpu-a")
    assert json.dumps(report)  # the report was written whole
