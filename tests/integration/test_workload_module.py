"""continuum.hydra.workload through a real ansible-playbook on localhost: the built-in smoke workloads, real runs.

The play saves the registered result to a file, so the test sees exactly what the module returned.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import REPO, fixture_path

pytestmark = pytest.mark.integration

VENV_BIN = os.path.dirname(sys.executable)


def play(tmp_path, task_args, check=False):
    """Run one continuum.hydra.workload task; return (rc, the module's result)."""
    saved = tmp_path / "result.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{"name": "Workloads", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Run", "continuum.hydra.workload": task_args, "register": "hydra_workload", "ignore_errors": True},
        {"name": "Save", "ansible.builtin.copy": {"content": "{{ hydra_workload | to_json }}", "dest": str(saved)},
         "check_mode": False, "diff": False}]}]))
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inventory), str(playbook)] + (["--check"] if check else [])
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), HYDRA_REPORT_DIR=str(tmp_path / "reports"))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path), check=False)
    assert saved.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode, json.loads(saved.read_text())


def test_smoke_tag_without_a_catalogue_runs_the_built_ins(tmp_path):
    run_log = tmp_path / "run.jsonl"
    rc, result = play(tmp_path, {"mode": "run", "tags": ["smoke"], "run_log": str(run_log)})
    assert rc == 0 and result["changed"] is False and not result.get("failed")
    rows = result["workloads"]
    assert [row["name"] for row in rows] == ["train_step", "h2d_copy", "allreduce"]
    for row in rows:
        assert row["status"] == "SUCCESS", row
        assert float(row["performance"]) > 0 and row["metric"]
        assert row["phases"]["steps"] >= 3 and row["phases"]["dominant"] in row["phases"]["phases"]
        assert row["telemetry"]["cpu"]["samples"] >= 1 and row["telemetry"]["memory"]["total_gib"] > 0
    assert {"data", "forward", "backward", "optimizer"} == set(rows[0]["phases"]["phases"])
    assert rows[0]["metric"] == "samples_per_second"
    assert result["summary"] == {"SUCCESS": 3, "FAILURE": 0, "SKIPPED": 0, "TIMEOUT": 0}
    events = [json.loads(line)["event"] for line in run_log.read_text().splitlines()]
    assert events[0] == "run_start" and events[-1] == "run_end" and events.count("workload_end") == 3


def test_madengine_catalogue_discover_run_and_a_bad_tag(tmp_path):
    dummy = fixture_path("madengine-dummy")
    rc, result = play(tmp_path, {"catalogue": dummy, "tags": ["dummy_test_group_1,dummy_test_group_2", "dummy3/model4:bs=8"]})
    assert rc == 0
    assert [(w["name"], w["args"]) for w in result["workloads"]] == [
        ("dummy", ""), ("dummy2/model1", ""), ("dummy2/model2", ""), ("dummy3/model4", " --bs 8")]

    rc, result = play(tmp_path, {"mode": "run", "catalogue": dummy, "tags": ["dummy_sleep", "dummy", "dummy_multi"],
                                 "timeout": 5, "gpus": 1})
    assert rc == 0
    assert [(w["name"], w["status"]) for w in result["workloads"]] == [
        ("dummy_sleep", "TIMEOUT"), ("dummy", "SUCCESS")] + [("dummy_multi_%d" % i, "SUCCESS") for i in range(1, 5)]
    assert result["workloads"][0]["duration_s"] < 30

    rc, result = play(tmp_path, {"mode": "run", "catalogue": dummy, "tags": ["dummy"]}, check=True)
    assert rc == 0 and result["mode"] == "discover" and result["workloads"][0]["name"] == "dummy" and "summary" not in result

    rc, result = play(tmp_path, {"catalogue": dummy, "tags": ["nosuch"]})
    assert result["failed"] is True and result["msg"] == "No models found corresponding to the given tag: nosuch"
    assert "Traceback" not in str(result.get("exception", "")) and re.match(r"^[^\n]+$", result["msg"])


def test_a_symlink_planted_as_the_run_log_is_not_followed(tmp_path):
    # Issue 23: the run log followed a planted link into the file it points at.
    target = tmp_path / "elsewhere.txt"
    target.write_text("not the run log's\n")
    link = tmp_path / "run.jsonl"
    link.symlink_to(target)
    _rc, result = play(tmp_path, {"mode": "run", "tags": ["smoke"], "run_log": str(link)})  # the play ignores errors
    assert result["failed"] is True
    assert result["msg"] == "run_log: cannot open %s for appending: it is a symbolic link (not followed)" % link
    assert target.read_text() == "not the run log's\n"
