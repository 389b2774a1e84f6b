"""An AWX job whose report dir lies in its private data dir (deleted with the job) gets exactly one warning line,
through a real ansible-playbook run of playbooks/doctor.yml with AWX's extra vars and environment
(docs/awx.md, Storage); a report dir outside it gets none, and the reports are written either way."""

import os
import re

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    fixture,
    host_vars,
    plant,
    run_playbook,
    write_host_bin,
)

pytestmark = pytest.mark.integration

WARNING = re.compile(r"^\[WARNING\]: continuum\.hydra\.fleet_report: report_dir (\S+) is inside this AWX job's private "
                     r"data dir (\S+), which AWX deletes after the job")


def _run(tmp_path, monkeypatch, report_dir, extra_vars):
    a100 = plant(fixture("a100-sxm4-v12.xml"), PERSISTENCE_ON)
    hosts = dict((name, host_vars(write_host_bin(str(tmp_path), name, a100))) for name in ("n1", "n2"))
    os.makedirs(report_dir, exist_ok=True)
    private = str(tmp_path / "awx_4711_k2j3h4")
    # What AWX and ansible-runner put in a job's environment (AWX's JOB_ID, AWX_HOST, AWX_PRIVATE_DATA_DIR).
    monkeypatch.setenv("JOB_ID", "4711")
    monkeypatch.setenv("AWX_HOST", "https://awx.example.com")
    monkeypatch.setenv("AWX_PRIVATE_DATA_DIR", private)
    monkeypatch.setenv("ANSIBLE_FORCE_COLOR", "0")
    proc, report = run_playbook({"all": {"hosts": hosts}}, report_dir,
                                extra_vars=dict({"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND}, **extra_vars))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = (proc.stdout + "\n" + proc.stderr).splitlines()
    return [m for m in (WARNING.match(line.strip()) for line in lines) if m], report, private


def test_a_report_dir_in_the_private_data_dir_is_one_warning_line(tmp_path, monkeypatch):
    report_dir = str(tmp_path / "awx_4711_k2j3h4" / "project" / "reports")
    warnings, report, private = _run(tmp_path, monkeypatch, report_dir, {"awx_job_id": 4711, "awx_job_template_name": "doctor"})
    assert [(m.group(1), m.group(2)) for m in warnings] == [(report_dir, private)]
    assert report is not None and sorted(report["hosts"]) == ["n1", "n2"]  # warned, still written


def test_a_shared_report_dir_is_no_warning(tmp_path, monkeypatch):
    report_dir = str(tmp_path / "shared" / "reports")
    warnings, report, dummy = _run(tmp_path, monkeypatch, report_dir, {"awx_job_id": 4711})
    assert warnings == []
    assert report is not None and report["totals"]["hosts"] == 2
