"""AWX without shared storage, through ansible-runner as AWX runs every job: each slice of a 4-host fleet runs
playbooks/doctor.yml with its own private data dir, its own cut of the inventory and AWX's extra vars; its artifacts
are read from the playbook_on_stats event (event_data.artifact_data under artifacts/<ident>/job_events/) and the
private data dir is deleted, as AWX deletes it. The merge node runs playbooks/merge.yml in a private data dir of its
own with those artifacts as extra vars (AWX's ancestor artifacts) and its own, outer, workflow id: the merged report
names each failing and warning host's checks, though no part file reached it (docs/awx.md)."""

import glob
import json
import os
import shutil
import sys
from xml.etree import ElementTree

import pytest
import yaml

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

ansible_runner = pytest.importorskip("ansible_runner")

pytestmark = pytest.mark.integration

MERGE = os.path.join(REPO, "playbooks", "merge.yml")
HOSTS = ["n1", "n2", "n3", "n4"]
SLICES = {"101": HOSTS[0::2], "102": HOSTS[1::2]}  # AWX: enabled hosts by name, round robin over 2 slices
SLICED_WORKFLOW, OUTER_WORKFLOW, MERGE_JOB = "77", "76", "201"


def _job(root, ident, playbook, hosts, extravars):
    """One AWX job through ansible-runner: (artifact_data of its playbook_on_stats event, the runner, its dir).

    As AWX: the job's own private data dir holding only its cut of the inventory, the extra vars in env/extravars,
    cwd in project/, the report dir where a relative ./reports would land (inside the private data dir)."""
    private = os.path.join(root, "awx_%s_private" % ident)
    os.makedirs(os.path.join(private, "project"))
    inventory = os.path.join(private, "inventory", "hosts.yml")
    os.makedirs(os.path.dirname(inventory))
    with open(inventory, "w") as handle:
        yaml.safe_dump({"all": {"hosts": hosts}}, handle)
    envvars = {"ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, "collections"),
               "HYDRA_REPORT_DIR": os.path.join(private, "project", "reports"), "ANSIBLE_NOCOLOR": "1",
               "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", "")}
    runner = ansible_runner.run(private_data_dir=private, ident=ident, playbook=playbook, inventory=inventory,
                                extravars=extravars, envvars=envvars, quiet=True, timeout=300)
    stats = []
    for path in sorted(glob.glob(os.path.join(private, "artifacts", ident, "job_events", "*.json"))):
        with open(path) as handle:
            event = json.load(handle)
        if event.get("event") == "playbook_on_stats":
            stats.append(event["event_data"].get("artifact_data"))
    with open(os.path.join(private, "artifacts", ident, "stdout")) as handle:
        stdout = handle.read()
    assert runner.rc == 0 and runner.status == "successful", stdout[-4000:]
    assert len(stats) == 1, "one playbook_on_stats event: %r" % stats
    return stats[0], stdout, private


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("awx-runner"))
    a100 = fixture("a100-sxm4-v12.xml")
    edits = {"n1": (PERSISTENCE_ON, UNCORRECTABLE_ECC), "n2": (UNCORRECTABLE_ECC,), "n3": (PERSISTENCE_ON,), "n4": ()}
    fleet = dict((name, host_vars(write_host_bin(os.path.join(root, "bin"), name, plant(a100, *edits[name])),
                                  ansible_python_interpreter=sys.executable)) for name in HOSTS)
    base = {"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND}
    ancestor_artifacts = {}
    for job, names in SLICES.items():
        artifacts, _stdout, private = _job(root, job, PLAYBOOK, dict((n, fleet[n]) for n in names),
                                           dict(base, awx_job_id=int(job), awx_workflow_job_id=int(SLICED_WORKFLOW),
                                                awx_job_launch_type="workflow"))
        assert glob.glob(os.path.join(private, "project", "reports", "parts", SLICED_WORKFLOW, "job-%s.json" % job))
        shutil.rmtree(private)  # AWX_CLEANUP_PATHS: the part file goes with the job
        ancestor_artifacts.update(artifacts)  # AWX: a shallow update per finished slice
    assert not glob.glob(os.path.join(root, "awx_*"))
    # The merge node: workflow-job extra vars and its own meta vars over the ancestor artifacts.
    extravars = dict(ancestor_artifacts, awx_job_id=int(MERGE_JOB), awx_workflow_job_id=int(OUTER_WORKFLOW))
    artifacts, stdout, private = _job(root, MERGE_JOB, MERGE, fleet, extravars)
    with open(os.path.join(private, "project", "reports", "fleet-report.json")) as handle:
        report = json.load(handle)
    texts = {}
    for name in ("fleet-report.md", "fleet-report.junit.xml", "fleet-report.prom"):
        with open(os.path.join(private, "project", "reports", name)) as handle:
            texts[name] = handle.read()
    return ancestor_artifacts, report, texts, stdout, artifacts


def test_each_slice_artifact_names_its_failing_and_warning_hosts_checks(merged):
    ancestor_artifacts = merged[0]
    assert sorted(ancestor_artifacts) == ["hydra_fleet_part_101", "hydra_fleet_part_102"]
    first, second = ancestor_artifacts["hydra_fleet_part_101"], ancestor_artifacts["hydra_fleet_part_102"]
    assert first["host_checks"] == {"n1": {"FAIL": ["gpu.ecc_errors"], "more": 0}}
    assert second["host_checks"] == {"n2": {"FAIL": ["gpu.ecc_errors"], "WARN": ["gpu.persistence_mode"], "more": 0},
                                     "n4": {"WARN": ["gpu.persistence_mode"], "more": 0}}


def test_merged_report_from_artifacts_alone_says_what_failed_where(merged):
    _artifacts, report, _md, _stdout, _merge_artifacts = merged
    assert report["merge"]["from_stats"] == ["hydra_fleet_part_101", "hydra_fleet_part_102"]
    assert report["merge"]["workflow_job_id"] == SLICED_WORKFLOW and report["merge"]["missing"] == 0
    hosts = report["hosts"]
    assert dict((h, hosts[h]["status"]) for h in HOSTS) == {"n1": "failed", "n2": "failed", "n3": "healthy", "n4": "warning"}
    assert (hosts["n1"]["failing_checks"], hosts["n1"]["warning_checks"]) == (["gpu.ecc_errors"], [])
    assert (hosts["n2"]["failing_checks"], hosts["n2"]["warning_checks"]) == (["gpu.ecc_errors"], ["gpu.persistence_mode"])
    assert (hosts["n4"]["failing_checks"], hosts["n4"]["warning_checks"]) == ([], ["gpu.persistence_mode"])
    assert hosts["n1"]["doctor"] is None  # the artifact carries ids, never a doctor result
    assert sorted(e["host"] for e in report["failing"]["gpu.ecc_errors"]) == ["n1", "n2"]
    warn = [a for a in report["actions"] if (a["check_id"], a["status"]) == ("gpu.persistence_mode", "WARN")]
    assert [a["hosts"] for a in warn] == [["n2", "n4"]]


def test_every_format_and_the_next_node_get_it(merged):
    _artifacts, _report, texts, stdout, merge_artifacts = merged
    rows = [[cell.strip() for cell in line.replace("\\_", "_").split("|")[1:-1]] for line in texts["fleet-report.md"].splitlines()
            if line.startswith("| FAIL |")]  # Markdown escapes the underscore; failing checks: status, check, host, ...
    assert sorted(row[2] for row in rows if row[1] == "gpu.ecc_errors") == ["n1", "n2"]
    assert [line for line in stdout.splitlines() if line.strip().startswith("FAIL") and "gpu.ecc_errors" in line
            and "n1" in line and "n2" in line]
    fleet = merge_artifacts["hydra_fleet"]
    assert fleet["failing_checks"] == {"gpu.ecc_errors": 2} and fleet["failing_hosts"] == ["n1", "n2"]
    assert fleet["warning_hosts"] == ["n4"] and fleet["ok"] is False
    suites = ElementTree.fromstring(texts["fleet-report.junit.xml"])
    failures = sorted((case.get("classname"), case.get("name")) for case in suites.iter("testcase") if case.find("failure") is not None)
    assert failures == [("n1", "gpu.ecc_errors"), ("n2", "gpu.ecc_errors")]
    problems = sorted(line.split("{", 1)[1].split("}", 1)[0] for line in texts["fleet-report.prom"].splitlines()
                      if line.startswith("hydra_host_check_problem{"))
    assert problems == ['host="n1",check="gpu.ecc_errors",status="FAIL"', 'host="n2",check="gpu.ecc_errors",status="FAIL"',
                        'host="n2",check="gpu.persistence_mode",status="WARN"', 'host="n4",check="gpu.persistence_mode",status="WARN"']
