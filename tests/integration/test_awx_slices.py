"""AWX job slicing simulated: two of three slices of a 6-host fleet run playbooks/doctor.yml with AWX's extra vars
into one report dir (the first with a failing host), then playbooks/merge.yml on the full inventory gives one
report with every host, the failure, and the third slice's hosts missing; other workflows' parts are ignored and a
corrupt part is a problem line."""

import json
import os

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    UNCORRECTABLE_ECC,
    fixture,
    host_vars,
    plant,
    run_playbook,
    write_host_bin,
)
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

pytestmark = pytest.mark.integration

MERGE = os.path.join(REPO, "playbooks", "merge.yml")
HOSTS = ["n1", "n2", "n3", "n4", "n5", "n6"]
SLICES = [HOSTS[0::3], HOSTS[1::3], HOSTS[2::3]]  # AWX: round robin by name


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    saved = os.environ.get("ANSIBLE_SHOW_CUSTOM_STATS")
    os.environ["ANSIBLE_SHOW_CUSTOM_STATS"] = "1"
    try:
        return _merged(tmp_path_factory)
    finally:
        if saved is None:
            os.environ.pop("ANSIBLE_SHOW_CUSTOM_STATS")
        else:
            os.environ["ANSIBLE_SHOW_CUSTOM_STATS"] = saved


def _merged(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("awx-slices"))
    report_dir = os.path.join(root, "reports")
    os.makedirs(report_dir)
    a100 = fixture("a100-sxm4-v12.xml")
    hosts = {}
    for name in HOSTS:
        edits = (PERSISTENCE_ON, UNCORRECTABLE_ECC) if name == "n1" else (PERSISTENCE_ON,)
        hosts[name] = host_vars(write_host_bin(root, name, plant(a100, *edits)))
    inventory = {"all": {"hosts": hosts}}
    base = {"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND}
    runs = []
    for job, names in ((101, SLICES[0]), (102, SLICES[1])):
        proc, report = run_playbook(inventory, report_dir, extra_vars=dict(base, awx_workflow_job_id=77, awx_job_id=job),
                                    limit=",".join(names + ["localhost"]))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert report is None, "a slice wrote the shared report"
        runs.append(proc)
    shared = [n for n in os.listdir(report_dir) if n.startswith("fleet-report")]
    assert shared == []
    parts_dir = os.path.join(report_dir, "parts")
    os.makedirs(os.path.join(parts_dir, "78"))
    other = json.load(open(os.path.join(parts_dir, "77", "job-102.json")))
    other.update(workflow_job_id="78", job_id="201")
    with open(os.path.join(parts_dir, "77", "job-201.json"), "w") as handle:
        json.dump(other, handle)  # another workflow's part, even in this workflow's directory
    with open(os.path.join(parts_dir, "77", "job-999.json"), "w") as handle:
        handle.write('{"kind": "continuum.hydra.fleet_part", "hosts": ')
    proc, report = run_playbook(inventory, report_dir, extra_vars={"awx_workflow_job_id": 77}, playbook=MERGE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return runs, proc, report, report_dir


def test_slices_publish_their_own_key(merged):
    runs = merged[0]
    for proc, job in zip(runs, ("101", "102")):
        assert '"hydra_fleet_part_%s"' % job in proc.stdout
        assert "parts/77/job-%s.json" % job in proc.stdout


def test_merged_report_has_every_host_the_failure_and_the_missing_slice(merged):
    _runs, _proc, report, report_dir = merged
    assert sorted(report["hosts"]) == HOSTS
    assert report["hosts"]["n1"]["status"] == "failed"
    assert "gpu.ecc_errors" in report["hosts"]["n1"]["failing_checks"]
    for name in SLICES[2]:
        assert report["hosts"][name]["status"] == "missing"
    for name in SLICES[0][1:] + SLICES[1]:
        assert report["hosts"][name]["status"] not in ("missing", "failed")
    assert report["totals"]["missing"] == 2 and report["totals"]["hosts"] == 6
    assert report["merge"]["jobs"] == ["101", "102"]
    assert report["merge"]["ignored"] and "job-201.json" in report["merge"]["ignored"][0]
    for name in ("fleet-report.html", "fleet-report.md", "fleet-report.junit.xml", "fleet-report.prom"):
        assert os.path.exists(os.path.join(report_dir, name))
    # the hosts came to the callback in the action's file, not in the task's result, and the callback removed it
    assert not os.path.exists(os.path.join(report_dir, "parts", "77", "merged.jsonl"))


def test_corrupt_part_is_one_problem_line_and_merged_stats_not_ok(merged):
    _runs, proc, report, _dir = merged
    problems = [p for p in report["analysis"]["problems"] if "job-999.json" in p]
    assert len(problems) == 1
    assert "job-999.json" in proc.stdout + proc.stderr
    assert '"hydra_fleet"' in proc.stdout and '"ok": false' in proc.stdout
