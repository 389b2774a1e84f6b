"""Run one of the collection's roles on localhost with a real ansible-playbook, for the role tests.

The play applies the role, then saves what the role registered to a JSON file (check_mode off for that
task only, so a --check run is recorded too); the test reads it with the recap's changed count and the
run's output.
"""

import json
import os
import re
import subprocess
import sys

import yaml

from ansible_collections.continuum.hydra.tests.support.helpers import REPO

VENV_BIN = os.path.dirname(sys.executable)
FAKE_SMI = os.path.join(REPO, "tests", "utils", "fake_nvidia_smi_state.py")


def fake_smi(tmp_path, recording, gpus=2):
    """A stateful fake nvidia-smi seeded from a real recording: returns (wrapper path, state path)."""
    state = str(tmp_path / "smi-state.json")
    subprocess.run([sys.executable, FAKE_SMI, "seed", recording, state, "--gpus", str(gpus)], check=True)
    wrapper = str(tmp_path / "nvidia-smi")
    with open(wrapper, "w") as handle:
        handle.write('#!/bin/sh\nHYDRA_FAKE_SMI_STATE="%s" exec "%s" "%s" "$@"\n' % (state, sys.executable, FAKE_SMI))
    os.chmod(wrapper, 0o755)
    return wrapper, state


def read_state(path):
    with open(path) as handle:
        return json.load(handle)


def setting_calls(state, since=0):
    """The nvidia-smi calls that change something (everything but queries and listings)."""
    return [c for c in state["calls"][since:]
            if not any(a.startswith("--query") for a in c) and "-lgi" not in c and "-q" not in c]


class RoleRun:
    def __init__(self, proc, result_path):
        self.rc = proc.returncode
        self.output = proc.stdout + proc.stderr
        self.result = None
        if os.path.exists(result_path):
            with open(result_path) as handle:
                self.result = json.load(handle)
            os.unlink(result_path)
        match = re.search(r"^localhost\s*:.*changed=(\d+)", self.output, re.M)
        self.changed = int(match.group(1)) if match else None


def run_role(tmp_path, role, role_vars, result_var, check=False, env=None, timeout=300):
    result_path = str(tmp_path / "role-result.json")
    playbook = [{
        "name": "Apply %s" % role,
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [
            {"name": "Apply the role", "ansible.builtin.include_role": {"name": "continuum.hydra.%s" % role}},
            {"name": "Save the result",
             "ansible.builtin.copy": {"content": "{{ %s | to_json }}" % result_var, "dest": result_path},
             "check_mode": False, "changed_when": False},
        ],
    }]
    play_path = str(tmp_path / "play.yml")
    with open(play_path, "w") as handle:
        yaml.safe_dump(playbook, handle)
    inventory = str(tmp_path / "inventory.yml")
    with open(inventory, "w") as handle:
        local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        yaml.safe_dump({"all": {"hosts": {"localhost": local}}}, handle)
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory, play_path, "-e", json.dumps(role_vars)]
    if check:
        argv += ["--check", "--diff"]
    run_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), ANSIBLE_NOCOLOR="1",
                   HYDRA_REPORT_DIR=str(tmp_path / "reports"), PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    run_env.update(env or {})
    proc = subprocess.run(argv, env=run_env, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False)
    return RoleRun(proc, result_path)
