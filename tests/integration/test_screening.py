"""Screening on the scheduler's terms (issue 27), against a real slurmctld and 3 slurmd (tests/utils/slurm_cluster.sh).

A busy node is a node a real job holds (`sbatch -w nodeN --wrap 'sleep ...'`, running under slurmd). The hosts are
local-connection inventory hosts with a fake nvidia-smi replaying a real recording and a fake dcgmi replaying a real
`dcgmi diag -j` recording that notes each call: whether the active checks loaded a node is whether dcgmi was called.
"""

import json
import os

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import (
    PERSISTENCE_ON,
    UNCORRECTABLE_ECC,
    fixture,
    host_vars,
    plant,
    run_playbook,
    write_host_bin,
)
from ansible_collections.continuum.hydra.tests.support.helpers import REPO, fixture_path
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator
from ansible_collections.continuum.hydra.tests.support.role_run import run_role
from ansible_collections.continuum.hydra.tests.support.slurm_cluster import (
    node_states,
    occupy,
    release,
    running_cluster,
    scontrol,
    set_nodes,
    slurm,
)

pytestmark = pytest.mark.integration

NODES = {"gpu-a": "node1", "gpu-b": "node2", "gpu-c": "node3"}
DCGM_HEALTHY = fixture_path("dcgm-diag", "virtualclient", "t4-dcgm31-r2-healthy.json")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(str(tmp_path_factory.mktemp("slurm")), len(NODES)) as conf:
        yield conf


def node_host(root, host, conf, faults=(), **extra):
    """A host with a recorded T4 (persistence on; ``faults`` planted), a fake dcgmi noting its calls and the cluster's
    SLURM_CONF."""
    bindir = write_host_bin(root, host, plant(fixture("tesla-t4.xml"), PERSISTENCE_ON, *faults))
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


# ---------------------------------------------------------------- playbooks/screen.yml

SCREEN_PLAYBOOK = os.path.join(REPO, "playbooks", "screen.yml")
# What the screening job's doctor runs (the health check's config): the guard, DCGM, and one check the fixture decides.
SCREEN_ONLY = ["system.node_idle", "gpu.dcgm_diag", "gpu.ecc_errors"]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """hydra-healthcheck installed by the real slurm_healthcheck role into a temp root (the program the job runs)."""
    tmp = tmp_path_factory.mktemp("healthcheck")
    root = str(tmp / "root")
    installed = run_role(tmp, "slurm_healthcheck", {
        "slurm_healthcheck_python": "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else os.sys.executable,
        "slurm_healthcheck_lib_dir": os.path.join(root, "lib"), "slurm_healthcheck_bin_dir": os.path.join(root, "sbin"),
        "slurm_healthcheck_config_path": os.path.join(root, "etc", "healthcheck.json"),
        "slurm_healthcheck_state_dir": os.path.join(root, "state"), "slurm_healthcheck_only": SCREEN_ONLY,
        "slurm_healthcheck_timeouts": {"nvidia_smi": 5}}, "slurm_healthcheck_result")
    assert installed.rc == 0, installed.output[-3000:]
    return os.path.join(root, "sbin", "hydra-healthcheck")


def screen_run(root, conf, program, hosts, report_dir, **extra):
    inventory = {"all": {"children": {
        "slurm_nodes": {"hosts": hosts},
        "slurm_controller": {"hosts": {"slurm-head": {"ansible_connection": "local", "ansible_python_interpreter": os.sys.executable}}},
    }}}
    values = {"hydra_screen_program": program, "hydra_screen_time_limit": 3, "hydra_screen_start_timeout": 8,
              "hydra_screen_partition": "gpu", "slurm_gate_slurm_conf": conf,
              "slurm_gate_node_names": dict((host, NODES[host]) for host in hosts)}
    values.update(extra)
    os.makedirs(report_dir, exist_ok=True)
    return run_playbook(inventory, report_dir, values, playbook=SCREEN_PLAYBOOK, timeout=600)


def screen_hosts(root, conf, failing=()):
    hosts = {}
    for host in NODES:
        hosts[host] = node_host(root, host, conf, faults=[UNCORRECTABLE_ECC] if host in failing else [],
                                hydra_screen_output_dir=os.path.join(root, "screen-out", host))
    return hosts


def job_of(report, host):
    return report["hosts"][host]["doctor"]["screen"]


def test_screen_runs_an_exclusive_job_per_node_and_a_busy_node_is_not_screened(cluster, program, tmp_path):
    root = str(tmp_path)
    set_nodes(cluster, list(NODES.values()), {})
    user_job = occupy(cluster, "node2")
    try:
        proc, report = screen_run(root, cluster, program, screen_hosts(root, cluster, failing=["gpu-c"]),
                                  os.path.join(root, "reports"), hydra_screen_gate=True, slurm_gate_max_fraction=0.5)
        still_running = slurm(cluster, "squeue", "-h", "-j", user_job, "-o", "%T")
    finally:
        release(cluster, user_job)
    assert report is not None, proc.stdout[-6000:] + proc.stderr[-3000:]
    out = proc.stdout
    # node1: an exclusive job of its own ran doctor's deep level; the guard inside it left out the job itself.
    job = job_of(report, "gpu-a")
    assert job["screened"] is True and job["state"] == "COMPLETED" and job["node"] == "node1", job
    shown = scontrol(cluster, "show", "job", job["job_id"], "-o")
    assert "JobName=hydra-screen" in shown and "NodeList=node1 " in shown and "OverSubscribe=NO" in shown
    checks = checks_of(report, "gpu-a")
    assert checks["system.node_idle"]["status"] == "PASS" and checks["system.node_idle"]["details"]["own_job"] == job["job_id"]
    assert checks["gpu.dcgm_diag"]["status"] == "PASS" and dcgmi_called(root, "gpu-a")
    assert report["hosts"]["gpu-a"]["status"] == "healthy" and report["hosts"]["gpu-a"]["doctor"]["level"] == "deep"
    # node2: a user's job held it; the screening job never started, was cancelled, and the user's job ran on.
    assert still_running == "RUNNING"
    busy = report["hosts"]["gpu-b"]
    assert busy["status"] == "unchecked", busy
    assert busy["message"].startswith("not screened: node node2: screening job ")
    assert "did not start within 8 s" in busy["message"] and "SLURM job %s (user-train, user root, running)" % user_job in busy["message"]
    assert not dcgmi_called(root, "gpu-b")
    # node3: the job's doctor found the planted uncorrectable ECC errors; the gate drained it.
    assert report["hosts"]["gpu-c"]["status"] == "failed" and report["hosts"]["gpu-c"]["failing_checks"] == ["gpu.ecc_errors"]
    assert node_states(cluster) == {"node1": (False, None), "node2": (False, None), "node3": (True, "hydra: gpu.ecc_errors")}
    assert "drain  node3 (gpu-c): doctor failed: gpu.ecc_errors" in out
    assert "leave  node2 (gpu-b): unknown (not screened: node node2" in out
    # Coverage: two screened this run; node2 never was.
    screening = report["screening"]
    assert screening["screened"] == ["gpu-a", "gpu-c"] and [row["host"] for row in screening["not_screened"]] == ["gpu-b"]
    assert screening["never"] == ["gpu-b"] and screening["covered"] is False
    assert "screening: 2 of 3 nodes screened within 7 days; 1 never screened (gpu-b)" in report["analysis"]["problems"]
    schema_validator().validate(report)
    # ... and in the Markdown and HTML tables and the Prometheus gauges the callback wrote.
    with open(os.path.join(root, "reports", "fleet-report.md")) as handle:
        assert "| gpu-b | never | never screened |" in handle.read()
    with open(os.path.join(root, "reports", "fleet-report.html")) as handle:
        assert '<tr data-host="gpu-b"><td>gpu-b</td><td>never</td><td>never screened</td></tr>' in handle.read()
    with open(os.path.join(root, "reports", "fleet-report.prom")) as handle:
        prom = handle.read()
    assert 'hydra_node_never_screened{host="gpu-b"} 1' in prom and 'hydra_node_screened_age_seconds{host="gpu-a"} ' in prom

    # The next run screens at most one node: the one never screened, now free.
    proc, report = screen_run(root, cluster, program, screen_hosts(root, cluster), os.path.join(root, "reports"),
                              hydra_screen_max_nodes=1)
    assert report is not None, proc.stdout[-6000:]
    assert report["screening"]["screened"] == ["gpu-b"] and sorted(report["hosts"]) == ["gpu-b"]
    assert report["screening"]["covered"] is True and report["screening"]["within"] == 3
    schema_validator().validate(report)
    assert dcgmi_called(root, "gpu-b")


def test_an_admins_drain_is_never_screened_over_and_stays(cluster, program, tmp_path):
    root = str(tmp_path)
    set_nodes(cluster, list(NODES.values()), {"node1": "admin: PSU swap"})
    proc, report = screen_run(root, cluster, program, {"gpu-a": screen_hosts(root, cluster)["gpu-a"]},
                              os.path.join(root, "reports"), hydra_screen_gate=True)
    assert report is not None, proc.stdout[-6000:]
    entry = report["hosts"]["gpu-a"]
    assert entry["status"] == "unchecked" and "the node cannot take it (ReqNodeNotAvail" in entry["message"], entry
    assert node_states(cluster)["node1"] == (True, "admin: PSU swap")
    assert not dcgmi_called(root, "gpu-a")
