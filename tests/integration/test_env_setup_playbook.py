"""playbooks/setup.yml through a real ansible-playbook on localhost, with real pip: --check, apply, rerun, failure.

Each run saves the registered result to a file, so the test sees exactly what the module returned.
"""

import glob
import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import REPO

pytestmark = pytest.mark.integration

VENV_BIN = os.path.dirname(sys.executable)


def play(tmp_path, extra_vars, check=False, interpreter=sys.executable):
    """Run playbooks/setup.yml; return (rc, the module's result, the recap's changed count).

    A second play saves the registered result (check mode off for that task only); a failed task's
    result is the JSON the default callback prints after "FAILED! =>".
    """
    saved = tmp_path / "result.json"
    if saved.exists():
        saved.unlink()
    wrapper = tmp_path / "play.yml"
    wrapper.write_text(json.dumps([
        {"ansible.builtin.import_playbook": os.path.join(REPO, "playbooks", "setup.yml")},
        {"name": "Save the result", "hosts": "all", "gather_facts": False, "tasks": [
            {"name": "Save", "ansible.builtin.copy": {"content": "{{ hydra_setup_result | to_json }}", "dest": str(saved)},
             "check_mode": False, "diff": False, "changed_when": False}]},
    ]))
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": interpreter}}}}))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inventory), str(wrapper), "-e", json.dumps(extra_vars)]
    if check:
        argv += ["--check", "--diff"]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), HYDRA_REPORT_DIR=str(tmp_path / "reports"))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path), check=False)
    output = proc.stdout + proc.stderr
    recap = re.search(r"^localhost\s*:.*changed=(\d+)", output, re.M)
    if saved.exists():
        result = json.loads(saved.read_text())
    else:
        failed = re.search(r"^fatal: \[localhost\]: FAILED! => (\{.*\})$", output, re.M)
        assert failed, "no result and no failure in the output (rc=%s): %s" % (proc.returncode, output[-3000:])
        result = json.loads(failed.group(1))
    return proc.returncode, result, int(recap.group(1)) if recap else None


def pip(venv, *args):
    return subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "--disable-pip-version-check"] + list(args),
                          check=True, capture_output=True, text=True, timeout=300).stdout


def test_check_apply_rerun_and_a_bad_spec(tmp_path):
    venv = str(tmp_path / "venv")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("six==1.16.0\n")
    base_dir = str(tmp_path / "project")
    setup_vars = {"hydra_setup_venv": venv, "hydra_setup_numpy_spec": "numpy==2.4.6",
                  "hydra_setup_requirements": str(requirements), "hydra_setup_base_dir": base_dir}

    rc, result, changed = play(tmp_path, setup_vars, check=True)
    assert rc == 0 and result["changed"] is True and changed == 1
    assert result["changes"] == [{"name": "numpy", "before": None, "after": "2.4.6", "action": "install"},
                                 {"name": "six", "before": None, "after": "1.16.0", "action": "install"}]
    assert result["diff"]["after"] == "numpy==2.4.6\nsix==1.16.0\n"
    assert not os.path.exists(venv) and not os.path.exists(base_dir)

    rc, result, changed = play(tmp_path, setup_vars)
    assert rc == 0 and result["changed"] is True and result["venv_created"] is True
    state = os.path.join(base_dir, ".continuum", "state")
    with open(os.path.join(state, "requirements.txt")) as handle:
        pinned = [line for line in handle.read().splitlines() if not line.startswith("#")]
    assert pinned == pip(venv, "freeze").splitlines() == ["numpy==2.4.6", "six==1.16.0"]
    with open(os.path.join(state, "env_manifest.json")) as handle:
        assert json.load(handle) == result["manifest"]

    rc, result, changed = play(tmp_path, setup_vars)
    assert rc == 0 and result["changed"] is False and changed == 0 and result["changes"] == []

    requirements.write_text("six==1.17.0\n")
    listed = pip(venv, "list", "--format=json")
    rc, result, changed = play(tmp_path, setup_vars, check=True)
    assert rc == 0 and result["changes"] == [{"name": "six", "before": "1.16.0", "after": "1.17.0", "action": "upgrade"}]
    assert pip(venv, "list", "--format=json") == listed

    rc, result, changed = play(tmp_path, dict(setup_vars, hydra_setup_numpy_spec="numpy>>=1"))
    assert rc == 2 and result["changed"] is False  # the "FAILED! =>" line it was read from
    assert result["msg"].startswith("numpy_spec 'numpy>>=1' is not a valid requirement") and "\n" not in result["msg"]
    assert "exception" not in result


def _python39():
    for candidate in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9"))) + ["/usr/bin/python3.9"]:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.mark.skipif(_python39() is None, reason="no Python 3.9 interpreter on this machine")
def test_the_module_runs_on_a_python39_target_and_builds_its_venv_with_it(tmp_path):
    venv = str(tmp_path / "venv39")
    rc, result, changed = play(tmp_path, {"hydra_setup_venv": venv, "hydra_setup_numpy_spec": "six==1.16.0"}, interpreter=_python39())
    assert rc == 0 and result["changed"] is True
    assert result["manifest"]["environment"]["python_version"].startswith("3.9.")
    assert {"name": "six", "version": "1.16.0"} in result["manifest"]["packages"]
    rc, result, changed = play(tmp_path, {"hydra_setup_venv": venv, "hydra_setup_numpy_spec": "six==1.16.0"}, interpreter=_python39())
    assert rc == 0 and result["changed"] is False
