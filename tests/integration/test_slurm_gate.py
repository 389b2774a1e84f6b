"""playbooks/validate_partition.yml against a real SLURM cluster (slurmctld + 4 slurmd + munged).

The cluster is started by tests/utils/slurm_cluster.sh in a temp dir with free ports and stopped in
teardown. The partition's nodes are local-connection inventory hosts (gpu-a..gpu-d, mapped to node1..node4)
whose doctor outcome is set by a fake nvidia-smi replaying a real recording (a copy with uncorrectable ECC
errors planted for a failing node). Every assertion reads `scontrol show node -o`.
"""

import datetime
import gzip
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.continuum.hydra.tests.support import slurm_cluster
from ansible_collections.continuum.hydra.tests.support.fleet import UNCORRECTABLE_ECC, fixture, host_vars, plant, write_host_bin
from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.slurm_cluster import node_states, running_cluster

pytestmark = pytest.mark.integration

PLAYBOOK = os.path.join(REPO, "playbooks", "validate_partition.yml")
VENV_BIN = os.path.dirname(sys.executable)
HOSTS = {"gpu-a": "node1", "gpu-b": "node2", "gpu-c": "node3", "gpu-d": "node4"}
# The gate's decision needs one check that reads only nvidia-smi: the outcome is then set by the fixture alone,
# whatever this machine's disks, kernel log or Python stack look like.
DOCTOR_ONLY = ["gpu.ecc_errors"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(str(tmp_path_factory.mktemp("slurm")), len(HOSTS)) as conf:
        yield conf


def set_nodes(conf, drains):
    """Every node in service, then the given {node: reason} drains."""
    slurm_cluster.set_nodes(conf, list(HOSTS.values()), drains)


@pytest.fixture(scope="module")
def host_bins(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("gate-hosts"))
    a100 = fixture("a100-sxm4-v12.xml")
    bins = {}
    for host in HOSTS:
        bins[host, "pass"] = write_host_bin(os.path.join(root, "pass"), host, a100)
        bins[host, "fail"] = write_host_bin(os.path.join(root, "fail"), host, plant(a100, UNCORRECTABLE_ECC))
        bins[host, "hang"] = write_host_bin(os.path.join(root, "hang"), host, hang=True)  # doctor: ERROR, could not judge
    return bins


def run_gate(tmp_path, conf, host_bins, failing=(), unreachable=(), check=False, erring=(), **gate_vars):
    nodes = {}
    if erring:
        gate_vars.setdefault("hydra_timeouts", {"nvidia_smi": 2})  # a hung nvidia-smi is given up on quickly
    for host in HOSTS:
        if host in erring:
            nodes[host] = host_vars(host_bins[host, "hang"])
        elif host in unreachable:
            # Nothing listens on port 1 of the loopback address: the connection is refused at once.
            nodes[host] = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                           "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no"}
        else:
            nodes[host] = host_vars(host_bins[host, "fail" if host in failing else "pass"])
    inventory = {"all": {"children": {
        "slurm_nodes": {"hosts": nodes},
        "slurm_controller": {"hosts": {"slurm-head": {"ansible_connection": "local",
                                                      "ansible_python_interpreter": sys.executable}}},
    }}}
    inv_path = str(tmp_path / "inventory.yml")
    with open(inv_path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    extra = {"hydra_only": DOCTOR_ONLY, "slurm_gate_slurm_conf": conf, "slurm_gate_node_names": HOSTS}
    extra.update(gate_vars)
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inv_path, PLAYBOOK, "-e", json.dumps(extra)]
    if check:
        argv += ["--check", "--diff"]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), HYDRA_REPORT_DIR=str(tmp_path / "reports"),
               ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    return proc, proc.stdout + proc.stderr


def recap_changed(output, host):
    match = re.search(r"^%s\s*:.*changed=(\d+)" % re.escape(host), output, re.M)
    assert match, "no recap line for %s:\n%s" % (host, output[-3000:])
    return int(match.group(1))


def test_drains_failing_resumes_own_drain_keeps_admin_drain_and_is_idempotent(cluster, host_bins, tmp_path):
    # node1 was drained by an earlier hydra run and passes now; node2 was drained by an admin and passes;
    # node3 fails now; node4 passes and is in service.
    set_nodes(cluster, {"node1": "hydra: gpu.ecc_errors", "node2": "admin: bad fan, ticket 4711"})
    proc, out = run_gate(tmp_path, cluster, host_bins, failing=["gpu-c"])
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster) == {
        "node1": (False, None),
        "node2": (True, "admin: bad fan, ticket 4711"),
        "node3": (True, "hydra: gpu.ecc_errors"),
        "node4": (False, None),
    }
    assert recap_changed(out, "slurm-head") == 1

    # A second run with the same outcomes changes nothing.
    proc, out = run_gate(tmp_path, cluster, host_bins, failing=["gpu-c"])
    assert proc.returncode == 0, out[-5000:]
    assert recap_changed(out, "slurm-head") == 0
    assert node_states(cluster)["node3"] == (True, "hydra: gpu.ecc_errors")
    assert node_states(cluster)["node2"] == (True, "admin: bad fan, ticket 4711")


def test_check_mode_prints_the_plan_and_changes_nothing(cluster, host_bins, tmp_path):
    set_nodes(cluster, {"node1": "hydra: gpu.ecc_errors", "node2": "admin: bad fan"})
    before = node_states(cluster)
    proc, out = run_gate(tmp_path, cluster, host_bins, failing=["gpu-c"], check=True)
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster) == before
    assert "drain  node3 (gpu-c): doctor failed: gpu.ecc_errors -> reason 'hydra: gpu.ecc_errors'" in out
    assert "resume node1 (gpu-a)" in out
    assert "leave  node2 (gpu-b): doctor healthy, but drained by an admin (admin: bad fan): hydra never resumes it" in out


def test_brake_trips_at_the_cap_and_changes_nothing(cluster, host_bins, tmp_path):
    # Two failing nodes of four is 50 %: past max_fraction 0.25. node1 would be resumed, but the brake
    # stops the run before any change, so it stays drained too.
    set_nodes(cluster, {"node1": "hydra: gpu.ecc_errors"})
    before = node_states(cluster)
    proc, out = run_gate(tmp_path, cluster, host_bins, failing=["gpu-c", "gpu-d"])
    assert proc.returncode != 0
    assert "would drain 2 of 4 nodes (50%), more than max_fraction 0.25 (25%)" in out
    assert node_states(cluster) == before

    # The count cap trips on its own too.
    proc, out = run_gate(tmp_path, cluster, host_bins, failing=["gpu-c"], slurm_gate_max_count=0)
    assert proc.returncode != 0
    assert "would drain 1 nodes, more than max_count 0" in out
    assert node_states(cluster) == before


def test_unreachable_nodes_follow_the_policy(cluster, host_bins, tmp_path):
    set_nodes(cluster, {"node2": "hydra: gpu.ecc_errors"})
    # Default policy 'ignore': the unreachable node keeps its state, even a hydra drain is not resumed.
    proc, out = run_gate(tmp_path, cluster, host_bins, unreachable=["gpu-b", "gpu-d"])
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster)["node2"] == (True, "hydra: gpu.ecc_errors")
    assert node_states(cluster)["node4"] == (False, None)

    proc, out = run_gate(tmp_path, cluster, host_bins, unreachable=["gpu-d"], slurm_gate_unreachable="drain")
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster)["node4"] == (True, "hydra: unreachable")
    # node2 passes now: its hydra drain is resumed in the same run.
    assert node_states(cluster)["node2"] == (False, None)


def test_decides_from_a_saved_fleet_report(cluster, host_bins, tmp_path):
    # node4 was drained by hydra (an Xid); its doctor errs now: could not judge, so the drain stays.
    set_nodes(cluster, {"node4": "hydra: gpu.xid_errors"})
    report = {"schema_version": "1.0.0", "kind": "continuum.hydra.fleet_report", "hosts": {
        "gpu-a": {"status": "healthy", "message": None, "failing_checks": [], "warning_checks": []},
        "gpu-b": {"status": "failed", "message": None, "failing_checks": ["gpu.nvlink"], "warning_checks": []},
        "gpu-c": {"status": "warning", "message": None, "failing_checks": [], "warning_checks": ["gpu.persistence_mode"]},
        # Could not judge: not drained unless slurm_gate_drain_on lists error, and not resumed.
        "gpu-d": {"status": "error", "message": None, "failing_checks": ["gpu.nvml_available"], "warning_checks": []},
    }}
    path = tmp_path / "fleet-report.json"
    path.write_text(json.dumps(report))
    proc, out = run_gate(tmp_path, cluster, host_bins, slurm_gate_fleet_report=str(path))
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster) == {"node1": (False, None), "node2": (True, "hydra: gpu.nvlink"),
                                    "node3": (False, None), "node4": (True, "hydra: gpu.xid_errors")}
    assert "leave  node4 (gpu-d): doctor error (gpu.nvml_available): could not judge, state kept (IDLE+DRAIN" in out


def test_a_saved_reports_open_interconnect_fail_drains_a_node_doctor_passed(cluster, host_bins, tmp_path):
    # Issue 26: a link that went down between two runs is the fleet analysis' finding, not doctor's one-run verdict;
    # from a saved report it drains the node with the port in the reason (slurm_gate_interconnect=false: doctor's alone).
    healthy = {"status": "healthy", "message": None, "failing_checks": [], "warning_checks": []}
    report = {"schema_version": "1.0.0", "kind": "continuum.hydra.fleet_report",
              "hosts": dict((host, dict(healthy)) for host in HOSTS), "findings": [
                  {"host": "gpu-c", "check_id": "interconnect.ib_errors", "subject": "mlx5_0 port 1", "status": "FAIL",
                   "message": "link_downed +2 since the last run (24.0 h)", "open": True, "clears_after": 3},
                  {"host": "gpu-a", "check_id": "interconnect.flap", "subject": "mlx5_0 port 1", "status": "WARN",
                   "message": "state ACTIVE -> DOWN since the last run", "open": True, "clears_after": 3}]}
    path = tmp_path / "fleet-report.json"
    path.write_text(json.dumps(report))
    # "false" as a string: what -e slurm_gate_interconnect=false and an AWX survey pass
    proc, out = run_gate(tmp_path, cluster, host_bins, slurm_gate_fleet_report=str(path), slurm_gate_interconnect="false")
    assert proc.returncode == 0, out[-5000:]
    assert not any(drained for drained, _reason in node_states(cluster).values())
    proc, out = run_gate(tmp_path, cluster, host_bins, slurm_gate_fleet_report=str(path))
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster) == {"node1": (False, None), "node2": (False, None), "node4": (False, None), "node3": (
        True, "hydra: interconnect.ib_errors mlx5_0 port 1: link_downed +2 since the last run (24.0 h)")}


_ADMIN_BETWEEN_PLAN_AND_CHANGE = """#!/bin/sh
# The real scontrol; on the gate's first read of every node (its plan), an admin drains two nodes right after.
out=$("%(real)s" "$@"); rc=$?
printf '%%s\\n' "$out"
if [ "$*" = "show node -o" ] && [ ! -e "%(mark)s" ]; then
    : > "%(mark)s"
    "%(real)s" update nodename=node1 state=drain "reason=admin: fan swap, ticket 99" >&2
    "%(real)s" update nodename=node3 state=drain "reason=admin: bad DIMM" >&2
fi
exit $rc
"""


def test_an_admin_drain_between_the_plan_and_the_change_is_never_lifted_or_replaced(cluster, host_bins, tmp_path):
    # Issue 23: node1 was drained by hydra and passes now, node3 fails now. Between the gate's plan and its changes an
    # admin re-drains node1 (their own reason) and drains node3: the gate resumed node1 - lifting the admin's drain -
    # and replaced node3's reason with its own. It re-reads each node right before changing it.
    set_nodes(cluster, {"node1": "hydra: gpu.ecc_errors"})
    wrapper = tmp_path / "scontrol"
    wrapper.write_text(_ADMIN_BETWEEN_PLAN_AND_CHANGE % {"real": shutil.which("scontrol"), "mark": tmp_path / "admin-acted"})
    wrapper.chmod(0o755)
    proc, out = run_gate(tmp_path, cluster, host_bins, failing=["gpu-c"], slurm_gate_scontrol_path=str(wrapper))
    assert (tmp_path / "admin-acted").exists()
    assert node_states(cluster) == {
        "node1": (True, "admin: fan swap, ticket 99"),
        "node2": (False, None),
        "node3": (True, "admin: bad DIMM"),
        "node4": (False, None),
    }, out[-5000:]
    assert proc.returncode == 0, out[-5000:]
    assert "leave  node1 (gpu-a): drained by someone else since the plan (admin: fan swap, ticket 99): not resumed" in out
    assert "leave  node3 (gpu-c): drained by someone else since the plan (admin: bad DIMM): not drained" in out


def fleet_report(tmp_path):
    with open(str(tmp_path / "reports" / "fleet-report.json")) as handle:
        return json.load(handle)


def test_a_node_doctor_could_not_judge_is_not_drained_by_default(cluster, host_bins, tmp_path):
    # Issue 27: error ("could not judge": a hung nvidia-smi here) drained the node by default. node2 is an admin's drain.
    set_nodes(cluster, {"node2": "admin: bad fan"})
    proc, out = run_gate(tmp_path, cluster, host_bins, erring=["gpu-c"])
    assert proc.returncode == 0, out[-5000:]
    assert fleet_report(tmp_path)["hosts"]["gpu-c"]["status"] == "error"
    assert node_states(cluster) == {"node1": (False, None), "node2": (True, "admin: bad fan"),
                                    "node3": (False, None), "node4": (False, None)}
    assert "leave  node3 (gpu-c): doctor error (gpu.ecc_errors): could not judge, state kept (IDLE)" in out
    # Asked for, error drains.
    proc, out = run_gate(tmp_path, cluster, host_bins, erring=["gpu-c"], slurm_gate_drain_on=["failed", "error"])
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster)["node3"] == (True, "hydra: gpu.ecc_errors")


def test_a_fleet_wide_checker_error_drains_nothing_and_raises_one_alarm(cluster, host_bins, tmp_path):
    # A checker outage on three of four nodes (doctor cannot judge them), one real failure (node3), an admin's drain
    # (node2). Even with error draining and no brake in the way, the breaker drains nothing: not the erring nodes, not
    # node3 (the run is not to be trusted), and node2 keeps the admin's reason.
    set_nodes(cluster, {"node2": "admin: bad fan"})
    proc, out = run_gate(tmp_path, cluster, host_bins, erring=["gpu-a", "gpu-b", "gpu-d"], failing=["gpu-c"],
                         slurm_gate_drain_on=["failed", "error"], slurm_gate_max_fraction=1.0)
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster) == {"node1": (False, None), "node2": (True, "admin: bad fan"),
                                    "node3": (False, None), "node4": (False, None)}
    assert ("BREAKER: 3 of 4 nodes could not be judged (error or unreachable), more than 50%: the checker is suspect, "
            "not the nodes; nothing will be drained") in out
    assert "leave  node3 (gpu-c): failed, not drained: circuit breaker: 3 of 4 nodes" in out
    assert recap_changed(out, "slurm-head") == 0
    report = fleet_report(tmp_path)
    assert report["actions"][0]["check_id"] == "hydra.checker"
    assert report["actions"][0]["hosts"] == ["gpu-a", "gpu-b", "gpu-d"]
    assert report["analysis"]["checker"]["tripped"] is True


# nvidia-bug-report.sh needs an NVIDIA driver: this stand-in writes what the real one writes where it writes it
# (--output-file BASE -> BASE.gz), the node's recorded nvidia-smi -q -x gzipped.
_BUG_REPORT = """#!/bin/sh
test "$1" = --output-file || exit 9
gzip -c "%s" > "$2.gz"
"""


def test_evidence_is_taken_before_the_drain_and_named_in_the_report(cluster, host_bins, tmp_path):
    # Issue 27 item 5: node3 and node4 fail; node3 has the vendor's tool, node4 none. Both are drained; node3's report
    # is fetched beside the fleet report's evidence before its drain, node4's absence is said, not an obstacle.
    set_nodes(cluster, {})
    bindir = host_bins["gpu-c", "fail"]
    tool = os.path.join(bindir, "nvidia-bug-report.sh")
    with open(tool, "w") as handle:
        handle.write(_BUG_REPORT % os.path.join(os.path.dirname(bindir), "nvidia-smi-q-x.xml"))
    os.chmod(tool, 0o755)
    try:
        proc, out = run_gate(tmp_path, cluster, host_bins, failing=["gpu-c", "gpu-d"], slurm_gate_collect_evidence=True,
                             slurm_gate_max_fraction=0.5, slurm_gate_evidence_dir=str(tmp_path / "node-evidence"))
    finally:
        os.unlink(tool)
    assert proc.returncode == 0, out[-5000:]
    assert node_states(cluster) == {"node1": (False, None), "node2": (False, None),
                                    "node3": (True, "hydra: gpu.ecc_errors"), "node4": (True, "hydra: gpu.ecc_errors")}
    report = fleet_report(tmp_path)
    taken = dict((entry["host"], entry) for entry in report["bug_reports"])
    assert sorted(taken) == ["gpu-c", "gpu-d"]
    assert taken["gpu-c"]["path"].startswith("evidence/gpu-c/nvidia-bug-report-") and taken["gpu-c"]["problem"] is None
    fetched = tmp_path / "reports" / taken["gpu-c"]["path"]
    assert fetched.stat().st_size == taken["gpu-c"]["bytes"] > 0
    with gzip.open(str(fetched), "rt") as handle:
        assert "<nvidia_smi_log>" in handle.read()
    assert taken["gpu-d"]["path"] is None and "neither nvidia-bug-report.sh nor amd-smi found" in taken["gpu-d"]["problem"]
    assert "Vendor report of gpu-c, taken before its drain: evidence/gpu-c/nvidia-bug-report-" in out
    # Before the drain: the node's copy was written no later than the drain slurmctld stamped (its clock, seconds).
    shown = slurm_cluster.scontrol(cluster, "show", "node", "node3", "-o")
    drained_at = datetime.datetime.fromisoformat(re.search(r"Reason=hydra: gpu.ecc_errors \[root@(\S+)\]", shown).group(1))
    (written,) = list((tmp_path / "node-evidence").iterdir())
    assert datetime.datetime.fromtimestamp(int(written.stat().st_mtime)) <= drained_at
