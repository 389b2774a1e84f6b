"""The fleet report when the history directory is on a mount that stopped answering (an NFS server gone away).

A real ansible-playbook run of playbooks/doctor.yml (tests/support/fleet.py's fake nvidia-smi) whose history_dir is
under a real hung FUSE mount (tests/support/hung_mount.py: every call under it blocks in the kernel), in a mount
namespace of its own. Creating the lock files there used to block for ever before any bounded read: the run never
ended and no report was written. Now the run ends, the report is written to its own directory, and it says in one
line each that the history and the findings store were not used.
"""

import json
import os
import signal
import subprocess

import pytest
import yaml

from ansible_collections.continuum.hydra.tests.support import hung_mount
from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    PLAYBOOK,
    UNCORRECTABLE_ECC,
    VENV_BIN,
    fixture,
    host_vars,
    plant,
    write_host_bin,
)
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.skipif(hung_mount.available() is not None, reason=str(hung_mount.available()))]

RUN_TIMEOUT = 300


def test_a_history_dir_on_a_hung_mount_costs_the_history_not_the_report(tmp_path):
    inventory = {"all": {"hosts": {"node-a": host_vars(write_host_bin(str(tmp_path / "bin"), "node-a",
                                                                      plant(fixture("a100-sxm4-v12.xml"), PERSISTENCE_ON,
                                                                            UNCORRECTABLE_ECC)))}}}
    inventory_path = tmp_path / "inventory.yml"
    inventory_path.write_text(yaml.safe_dump(inventory))
    report_dir, history_dir = tmp_path / "reports", str(tmp_path / "hung" / "history")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
               HYDRA_REPORT_DIR=str(report_dir), HYDRA_HISTORY_DIR=history_dir, HYDRA_STATE_LOCK_TIMEOUT="1",
               ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inventory_path), PLAYBOOK,
            "-e", json.dumps({"hydra_only": GPU_ONLY}), "-e", json.dumps({"hydra_exclude": MACHINE_BOUND})]
    proc = subprocess.Popen(hung_mount.command(str(tmp_path / "hung"), argv), env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the mount's holder among them: the hung calls end with it
        out, err = proc.communicate()
        pytest.fail("the run did not end within %d s (hung on the mount):\n%s" % (RUN_TIMEOUT, (out + err)[-3000:]))
    out += err
    assert proc.returncode == 0, out[-5000:]
    with open(str(report_dir / "fleet-report.json")) as handle:
        report = json.load(handle)
    assert report["hosts"]["node-a"]["status"] == "failed"
    history_line = "history: not read or written this run: creating the lock file %s/fleet-history.lock timed out after 1s" % history_dir
    assert history_line in report["analysis"]["problems"]
    store = os.path.join(history_dir, "findings.json")
    findings_line = "findings: %s not updated: creating the lock file %s.lock timed out after 1s" % (store, store)
    assert report["findings_store"] == {"path": store, "updated": False, "set_aside": None, "problems": [findings_line]}
    # This run's findings are still reported, and both lines are shown to the person running it.
    assert [f["check_id"] for f in report["findings"] if f["host"] == "node-a"] == ["gpu.ecc_errors"]
    assert history_line in out and findings_line in out
