"""playbooks/tasks/doctor.yml, the one doctor task of doctor.yml, validate_partition.yml and remediate.yml: each of
them runs doctor at the playbook's hydra_level with its hydra_state_dir (validate_partition.yml and remediate.yml
passed neither before, so their doctor ran at standard and read the default state dir).

The proof of the state dir is check slurm.healthcheck (level quick): it reads <state_dir>/healthcheck/last.json,
planted here as a file that is not the health check's JSON, so the check ERRORs naming the planted path. And
validate_partition.yml leaves a node whose doctor hangs past the task's timeout to the gate.
"""

import os
import sys

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import run_playbook
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("playbook", ["doctor.yml", "validate_partition.yml", "remediate.yml"])
def test_each_playbook_runs_doctor_at_its_level_with_its_state_dir(tmp_path, playbook):
    last = tmp_path / "state" / "healthcheck" / "last.json"
    last.parent.mkdir(parents=True)
    last.write_text("not the health check's JSON\n")
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    # validate_partition.yml's gate play finds no slurm_controller host here: doctor's play is what is run.
    inventory = {"all": {"children": {"slurm_nodes": {"hosts": {"node-a": node}}}}}
    reports = tmp_path / "reports"
    reports.mkdir()
    proc, report = run_playbook(inventory, str(reports), playbook=os.path.join(REPO, "playbooks", playbook), extra_vars={
        "hydra_only": ["slurm.healthcheck"], "hydra_level": "quick", "hydra_state_dir": str(tmp_path / "state")})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    doctor = report["hosts"]["node-a"]["doctor"]
    assert doctor["level"] == "quick"
    chk = doctor["checks"][0]
    assert chk["id"] == "slurm.healthcheck" and chk["status"] == "ERROR" and str(last) in chk["message"], chk


def test_validate_partition_leaves_a_node_whose_doctor_hangs_to_the_gate(tmp_path):
    # A Python that never answers: the task's timeout (doctor's total plus the margin) ends it. failed_when: false
    # never reached a task timeout, so the node failed the play and, every node hung, the gate never ran.
    hang = tmp_path / "python3"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    node = {"ansible_connection": "local", "ansible_python_interpreter": str(hang),
            "hydra_timeouts": {"total": 1}, "hydra_task_timeout_margin": 1}
    head = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"children": {"slurm_nodes": {"hosts": {"node-a": node}},
                                      "slurm_controller": {"hosts": {"head": head}}}}}
    reports = tmp_path / "reports"
    reports.mkdir()
    # The gate is given a slurm.conf that does not exist: that it got so far and says so is the proof it ran.
    proc, report = run_playbook(inventory, str(reports), playbook=os.path.join(REPO, "playbooks", "validate_partition.yml"),
                                extra_vars={"slurm_gate_slurm_conf": str(tmp_path / "absent.conf")})
    out = proc.stdout + proc.stderr
    assert report["hosts"]["node-a"]["status"] == "task_failed"
    assert report["hosts"]["node-a"]["message"].startswith("Check host health and configuration: timed out after 2 s")
    assert "slurm_conf: %s is not a file" % (tmp_path / "absent.conf") in out, out[-4000:]
