"""playbooks/workloads.yml over a simulated fleet of three local hosts, real runs, the real callback.

A small MAD catalogue in a temporary directory: ``train`` prints ``performance: $PERF samples_per_second``
(each host's PERF through its own hydra_workload_extra_env; node-c is 60 % slower: the straggler), and
``check`` exits 1 on the host where FAIL_CHECK is set (node-b: the failure). Nothing is faked: the module runs
the scripts, the callback writes fleet-report.json, fleet-report.md, the JUnit and Prometheus files and perf.csv.
"""

import csv
import json
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import run_playbook
from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator

pytestmark = pytest.mark.integration

PLAYBOOK = os.path.join(REPO, "playbooks", "workloads.yml")
TRAIN = '#!/bin/bash\necho "training with $*"\necho "performance: ${PERF} samples_per_second"\n'
CHECK = ('#!/bin/bash\nif [ -n "$FAIL_CHECK" ]; then echo "RuntimeError: the check broke on purpose" >&2; exit 1; fi\n'
         'echo "performance: 5.5 ops_per_second"\n')
MADENGINE_COLUMNS = ["model", "n_gpus", "nnodes", "gpus_per_node", "training_precision", "pipeline", "args", "tags",
                     "docker_file", "base_docker", "docker_sha", "docker_image", "git_commit", "machine_name",
                     "deployment_type", "launcher", "gpu_architecture", "performance", "metric", "relative_change", "status",
                     "build_duration", "test_duration", "dataname", "data_provider_type", "data_size",
                     "data_download_duration", "build_number", "additional_docker_run_options"]


def catalogue(root):
    for name, body in (("train", TRAIN), ("check", CHECK)):
        os.makedirs(os.path.join(root, "scripts", name))
        path = os.path.join(root, "scripts", name, "run.sh")
        with open(path, "w") as handle:
            handle.write(body)
        os.chmod(path, 0o755)
    models = [{"name": "train", "scripts": "scripts/train/run.sh", "n_gpus": "-1", "tags": ["fleet"], "args": "--steps 3",
               "timeout": 60},
              {"name": "check", "scripts": "scripts/check/run.sh", "n_gpus": "-1", "tags": ["fleet"], "args": "", "timeout": 60}]
    with open(os.path.join(root, "models.json"), "w") as handle:
        json.dump(models, handle)


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("workload-fleet"))
    catalogue(os.path.join(root, "catalogue"))
    reports = os.path.join(root, "reports")
    os.makedirs(reports)
    envs = {"node-a": {"PERF": "100"}, "node-b": {"PERF": "98", "FAIL_CHECK": "1"}, "node-c": {"PERF": "40"}}
    inventory = {"all": {"hosts": dict((host, {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "hydra_workload_extra_env": env})
        for host, env in envs.items())}}
    proc, report = run_playbook(inventory, reports, playbook=PLAYBOOK, timeout=120, extra_vars={
        "hydra_workload_catalogue": os.path.join(root, "catalogue"), "hydra_workload_tags": ["fleet"],
        "hydra_workload_gpus": 0, "hydra_workload_gpu_vendor": "none", "hydra_workload_sample_interval": 0.2})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert report is not None, proc.stdout[-4000:]
    return proc, report, reports


def test_the_report_has_a_workload_section_with_the_straggler_and_the_failure(fleet_run):
    proc, report, _reports = fleet_run
    assert report["schema_version"] == "1.6.0"
    errors = sorted(schema_validator().iter_errors(report), key=lambda e: list(e.path))
    assert not errors, [(list(e.path), e.message) for e in errors[:5]]
    section = report["workloads"]
    assert section["hosts"] == ["node-a", "node-b", "node-c"]
    assert section["counts"]["SUCCESS"] == 5 and section["counts"]["FAILURE"] == 1
    train = section["workloads"]["train"]
    [table] = train["tables"]
    assert table["class"] == "no GPU" and table["metric"] == "samples_per_second"
    assert (table["n"], table["median"], table["min"], table["max"]) == (3, 98.0, 40.0, 100.0)
    assert [s["host"] for s in table["stragglers"]] == ["node-c"] and table["stragglers"][0]["ratio"] < 0.5
    assert train["failures"] == []
    check = section["workloads"]["check"]
    assert [f["host"] for f in check["failures"]] == ["node-b"] and check["failures"][0]["status"] == "FAILURE"
    assert [t["n"] for t in check["tables"]] == [2] and check["tables"][0]["stragglers"] == []
    assert report["hosts"]["node-b"]["workload"]["rows"][1]["status"] == "FAILURE"
    assert "Workloads: 2 on 3 hosts: 5 SUCCESS, 1 FAILURE" in proc.stdout
    assert "SLOW  train" in proc.stdout and "node-c -59%" in proc.stdout


def test_perf_csv_has_madengine_columns_and_one_row_per_host_and_workload(fleet_run):
    _proc, _report, reports = fleet_run
    with open(os.path.join(reports, "perf.csv"), newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert reader.fieldnames == MADENGINE_COLUMNS
    assert [(r["machine_name"], r["model"], r["status"]) for r in rows] == [
        ("node-a", "train", "SUCCESS"), ("node-a", "check", "SUCCESS"), ("node-b", "train", "SUCCESS"),
        ("node-b", "check", "FAILURE"), ("node-c", "train", "SUCCESS"), ("node-c", "check", "SUCCESS")]
    assert rows[4]["performance"] == "40" and rows[4]["metric"] == "samples_per_second"
    assert rows[0]["args"] == "--steps 3" and rows[0]["tags"] == "fleet" and rows[0]["n_gpus"] == "0"
    assert float(rows[0]["test_duration"]) > 0 and rows[3]["performance"] == ""


def test_markdown_junit_and_prometheus_carry_the_workloads(fleet_run):
    _proc, _report, reports = fleet_run
    with open(os.path.join(reports, "fleet-report.md")) as handle:
        markdown = handle.read()
    assert "## Workloads" in markdown and "### train" in markdown
    assert "| no GPU | samples\\_per\\_second | 3 | 98 | 40 | 100 | node-c -59% |" in markdown
    assert "| node-b | no GPU | FAILURE |" in markdown
    suites = ET.parse(os.path.join(reports, "fleet-report.junit.xml")).getroot()
    failed = [(c.get("classname"), c.get("name")) for c in suites.iter("testcase") if c.find("failure") is not None]
    assert failed == [("node-b", "workload.check")]
    with open(os.path.join(reports, "fleet-report.prom")) as handle:
        prom = handle.read()
    assert 'hydra_workload_performance{host="node-c",workload="train",metric="samples_per_second"} 40.0' in prom
    assert 'hydra_workload_status{host="node-b",workload="check",status="FAILURE",failure="true"} 1' in prom
