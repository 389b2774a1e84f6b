"""playbooks/remediate.yml end to end: doctor reads a stateful fake nvidia-smi (a real A100 recording with the
fake's state edited in), the plan maps the WARN/FAIL checks to roles, the roles change the fake's state, and a
second doctor run finds nothing left to fix.
"""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.continuum.hydra.tests.support.helpers import REPO, fixture_path
from ansible_collections.continuum.hydra.tests.support.role_run import VENV_BIN, fake_smi, read_state, setting_calls

pytestmark = pytest.mark.integration

PLAYBOOK = os.path.join(REPO, "playbooks", "remediate.yml")
ONLY = ["gpu.persistence_mode", "gpu.mig", "gpu.ecc_errors"]


@pytest.fixture
def host(tmp_path):
    wrapper, state = fake_smi(tmp_path, fixture_path("nvidia-smi", "a100-sxm4-v12.xml"), gpus=2)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(wrapper, str(bindir / "nvidia-smi"))
    inventory = str(tmp_path / "inventory.yml")
    with open(inventory, "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"gpu-a": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "hydra_environment": {"PATH": "%s:/usr/bin:/bin" % bindir}}}}}, handle)
    return inventory, state


def remediate(tmp_path, inventory, check=False, **extra):
    values = {"hydra_only": ONLY}
    values.update(extra)
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory, PLAYBOOK, "-e", json.dumps(values)]
    if check:
        argv += ["--check", "--diff"]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), HYDRA_REPORT_DIR=str(tmp_path / "reports"),
               PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    out = proc.stdout + proc.stderr
    match = re.search(r"^gpu-a\s*:.*changed=(\d+)", out, re.M)
    return proc.returncode, out, int(match.group(1)) if match else None


FIX_LINE = "fix    gpu.persistence_mode (WARN) with gpu_settings: persistence mode on for GPU(s) 0, 1"


def test_shows_the_plan_and_changes_nothing_unless_asked(tmp_path, host):
    rc, out, changed = remediate(tmp_path, host[0])
    assert rc == 0, out[-4000:]
    assert FIX_LINE in out
    assert changed == 0
    assert setting_calls(read_state(host[1])) == []

    rc, out, changed = remediate(tmp_path, host[0], check=True, hydra_remediate=True)
    assert rc == 0, out[-4000:]
    assert FIX_LINE in out
    assert re.search(r'^\+\s+"persistence_mode": "Enabled",$', out, re.M)
    assert setting_calls(read_state(host[1])) == []


def test_fixes_then_finds_nothing_left(tmp_path, host):
    rc, out, changed = remediate(tmp_path, host[0], hydra_remediate=True)
    assert rc == 0, out[-4000:]
    assert changed == 1
    assert [g["persistence_mode"] for g in read_state(host[1])["gpus"]] == ["Enabled", "Enabled"]
    assert sorted(setting_calls(read_state(host[1]))) == [["-i", "0", "-pm", "1"], ["-i", "1", "-pm", "1"]]

    calls = len(read_state(host[1])["calls"])
    rc, out, changed = remediate(tmp_path, host[0], hydra_remediate=True)
    assert rc == 0, out[-4000:]
    assert changed == 0
    assert "nothing to fix" in out
    assert setting_calls(read_state(host[1]), since=calls) == []


def test_mig_fix_needs_the_confirmation(tmp_path, host):
    # The recording has MIG on; the host is expected to run without it: gpu.mig FAILs, the mig role fixes it.
    expect = {"mig_mode": "disabled", "persistence_mode": "disabled"}
    rc, out, _changed = remediate(tmp_path, host[0], hydra_remediate=True, hydra_expect=expect)
    assert rc != 0
    assert "fix    gpu.mig (FAIL) with mig: MIG disabled on GPU(s) 0, 1" in out
    assert "but confirm is not true; nothing was changed" in out
    assert setting_calls(read_state(host[1])) == []

    rc, out, changed = remediate(tmp_path, host[0], hydra_remediate=True, hydra_expect=expect, mig_confirm=True)
    assert rc == 0, out[-4000:]
    assert [g["mig_mode_current"] for g in read_state(host[1])["gpus"]] == ["Disabled", "Disabled"]


def test_decides_from_a_saved_fleet_report(tmp_path, host):
    # The report says persistence mode is off on GPU 1 only: only GPU 1 is changed, whatever the host says now.
    doctor = {"overall_status": "warning", "checks": [
        {"id": "gpu.persistence_mode", "status": "WARN", "message": "GPU 1: persistence mode is off",
         "details": {"gpus": [{"index": 1, "status": "WARN", "persistence_mode": "disabled"}]},
         "remediation": "nvidia-smi -pm 1"},
        {"id": "gpu.ecc_errors", "status": "FAIL", "message": "GPU 0: 3 uncorrectable", "details": {},
         "remediation": "Drain the node and reset the GPU."}]}
    report = tmp_path / "fleet-report.json"
    hosts = {"gpu-a": {"status": "failed", "doctor": doctor}}
    report.write_text(json.dumps({"kind": "continuum.hydra.fleet_report", "hosts": hosts}))
    rc, out, changed = remediate(tmp_path, host[0], hydra_remediate=True, hydra_fleet_report=str(report))
    assert rc == 0, out[-4000:]
    assert "manual gpu.ecc_errors (FAIL): no automatic fix; Drain the node and reset the GPU." in out
    assert setting_calls(read_state(host[1])) == [["-i", "1", "-pm", "1"]]
