"""Findings that last, through real ansible-playbook runs (tests/support/fleet.py): run 1 with an
uncorrectable-ECC GPU opens a finding; run 2 with that GPU clean again still shows it open; playbooks/acknowledge.yml
closes it (check mode and bad input first); the next run's report shows it closed."""

import json
import os
import subprocess

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    UNCORRECTABLE_ECC,
    VENV_BIN,
    fixture,
    host_uuid,
    host_vars,
    plant,
    run_playbook,
    write_host_bin,
)
from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator

pytestmark = pytest.mark.integration

ECC_UUID = host_uuid("GPU-513536b6-7d19-9063-b049-1e69664bb298", "node-ecc")
ACK = os.path.join(REPO, "playbooks", "acknowledge.yml")


def _doctor(inventory, report_dir):
    proc, report = run_playbook(inventory, report_dir, extra_vars={"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND})
    assert report is not None, proc.stdout + proc.stderr
    return proc, report


def _ack(report_dir, extra, check=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
               HYDRA_REPORT_DIR=report_dir, ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), ACK, "-e", json.dumps(extra)] + (["--check", "--diff"] if check else [])
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def _store(report_dir):
    with open(os.path.join(report_dir, "history", "findings.json")) as handle:
        return json.load(handle)


def _ecc(findings):
    found = [f for f in findings if f["host"] == "node-ecc" and f["check_id"] == "gpu.ecc_errors"]
    assert len(found) == 1, findings
    return found[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("findings-fleet"))
    report_dir = os.path.join(root, "reports")
    os.makedirs(report_dir)
    a100 = fixture("a100-sxm4-v12.xml")
    inventory = {"all": {"hosts": {
        "node-ok": host_vars(write_host_bin(root, "node-ok", plant(a100, PERSISTENCE_ON))),
        "node-ecc": host_vars(write_host_bin(root, "node-ecc", plant(a100, PERSISTENCE_ON, UNCORRECTABLE_ECC))),
    }}}
    out = {"report_dir": report_dir}
    out["run1"] = _doctor(inventory, report_dir)[1]
    write_host_bin(root, "node-ecc", plant(a100, PERSISTENCE_ON))  # reset: clean again
    out["run2_proc"], out["run2"] = _doctor(inventory, report_dir)
    for name in ("fleet-report.md", "fleet-report.html"):
        with open(os.path.join(report_dir, name)) as handle:
            out["run2_" + name] = handle.read()
    out["ack_bad_host"] = _ack(report_dir, {"hydra_ack_hosts": ["node-nope"]})
    out["ack_bad_check"] = _ack(report_dir, {"hydra_ack_hosts": ["node-ecc"], "hydra_ack_checks": ["gpu.nope"]})
    out["ack_none"] = _ack(report_dir, {"hydra_ack_note": "x"})
    out["ack_check_mode"] = _ack(report_dir, {"hydra_ack_hosts": ["node-ecc"], "hydra_ack_checks": ["gpu.ecc_errors"]}, check=True)
    out["store_after_check_mode"] = _store(report_dir)
    out["ack"] = _ack(report_dir, {"hydra_ack_hosts": ["node-ecc"], "hydra_ack_checks": ["gpu.ecc_errors"],
                                   "hydra_ack_note": "reset, looks fine"})
    out["store_after_ack"] = _store(report_dir)
    out["ack_again"] = _ack(report_dir, {"hydra_ack_hosts": ["node-ecc"], "hydra_ack_checks": ["gpu.ecc_errors"]})
    out["run3"] = _doctor(inventory, report_dir)[1]
    return out


def test_run_1_opens_a_finding_for_the_ecc_gpu(runs):
    ecc = _ecc(runs["run1"]["findings"])
    assert ecc["open"] is True and ecc["status"] == "FAIL" and ecc["gpu_uuid"] == ECC_UUID and ecc["times_seen"] == 1
    assert ecc["escalation"]["level"] == 1 and "reset the GPU" in ecc["escalation"]["action"]
    assert ecc["boot_id"]  # doctor's environment carries the host's boot id
    assert not [f for f in runs["run1"]["findings"] if f["host"] == "node-ok" and f["status"] == "FAIL"]


def test_run_2_with_the_gpu_clean_still_shows_the_finding_open(runs):
    report = runs["run2"]
    assert report["hosts"]["node-ecc"]["failing_checks"] == []
    ecc = _ecc(report["findings"])
    assert ecc["open"] is True and ecc["times_seen"] == 1 and ecc["last_seen"] == runs["run1"]["generated_at"]
    assert "Open findings" in runs["run2_proc"].stdout and "gpu.ecc_errors" in runs["run2_proc"].stdout
    markdown = runs["run2_fleet-report.md"]
    assert "## Open findings" in markdown
    assert "node" in markdown.split("## Open findings")[1] and "513536b6" in markdown.split("## Open findings")[1]
    html = runs["run2_fleet-report.html"]
    assert 'id="findings-table"' in html and ECC_UUID in html.split('id="findings-table"')[1]
    schema_validator().validate(report)


def test_bad_acknowledge_input_is_a_one_line_failure_naming_the_value(runs):
    for name, value in (("ack_bad_host", "no finding for host 'node-nope'"), ("ack_bad_check", "no finding for check 'gpu.nope'"),
                        ("ack_none", "no hosts given")):
        proc = runs[name]
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert value in proc.stdout, proc.stdout


def test_check_mode_says_what_it_would_close_and_writes_nothing(runs):
    proc = runs["ack_check_mode"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "would close 1 finding: node-ecc gpu.ecc_errors GPU 0 %s" % ECC_UUID in proc.stdout
    assert '"open": false' in proc.stdout  # the diff
    assert _ecc(runs["store_after_check_mode"]["findings"])["open"] is True


def test_acknowledge_closes_it_in_the_store_and_in_the_next_report(runs):
    proc = runs["ack"]
    assert proc.returncode == 0 and "closed 1 finding: node-ecc gpu.ecc_errors" in proc.stdout, proc.stdout + proc.stderr
    stored = _ecc(runs["store_after_ack"]["findings"])
    assert stored["open"] is False
    assert stored["acknowledged"]["note"] == "reset, looks fine" and stored["acknowledged"]["by"]
    again = runs["ack_again"]
    assert again.returncode == 0 and "closed 0 findings" in again.stdout and "changed=0" in again.stdout
    report = runs["run3"]
    ecc = _ecc(report["findings"])
    assert ecc["open"] is False and ecc["acknowledged"]["note"] == "reset, looks fine"
    assert report["findings"][-1] is not None and all(f["open"] is False for f in report["findings"] if f["status"] == "FAIL")
    schema_validator().validate(report)


def test_a_store_with_a_field_of_the_wrong_type_is_set_aside_and_the_report_says_so(tmp_path):
    # Issue 23: times_seen "abc" made every later run "findings: not updated" with no findings at all, and only
    # the terminal said so.
    root = str(tmp_path)
    report_dir = os.path.join(root, "reports")
    os.makedirs(report_dir)
    a100 = fixture("a100-sxm4-v12.xml")
    inventory = {"all": {"hosts": {"node-ecc": host_vars(write_host_bin(root, "node-ecc", plant(a100, PERSISTENCE_ON, UNCORRECTABLE_ECC)))}}}
    _doctor(inventory, report_dir)
    store_path = os.path.join(report_dir, "history", "findings.json")
    stored = _store(report_dir)
    _ecc(stored["findings"])["times_seen"] = "abc"
    with open(store_path, "w") as handle:
        json.dump(stored, handle)
    proc, report = _doctor(inventory, report_dir)
    ecc = _ecc(report["findings"])  # this run's finding, from an empty store
    assert ecc["open"] is True and ecc["times_seen"] == 1
    store = report["findings_store"]
    assert store["updated"] is True and store["set_aside"].startswith(store_path + ".bad-"), store
    [line] = store["problems"]
    assert "times_seen: 'abc' is not a count" in line and "kept as %s" % store["set_aside"] in line
    with open(store["set_aside"]) as handle:
        assert json.load(handle) == stored  # kept, never lost
    assert _ecc(_store(report_dir)["findings"])["times_seen"] == 1
    assert "PROBLEM " + line in proc.stdout
    with open(os.path.join(report_dir, "fleet-report.md")) as handle:
        assert "> **Problem:** findings: " in handle.read()
    with open(os.path.join(report_dir, "fleet-report.html")) as handle:
        assert 'class="problem findings-store">findings: %s is unusable' % store_path in handle.read()
    schema_validator().validate(report)
    # The next run reads the new store: no problem left.
    _proc, again = _doctor(inventory, report_dir)
    assert again["findings_store"]["problems"] == [] and _ecc(again["findings"])["times_seen"] == 2


def test_a_store_that_is_a_fifo_does_not_hang_the_run(tmp_path):
    # Issue 23: open() of a FIFO without a writer blocks for ever: the run never ended and wrote no report.
    root = str(tmp_path)
    report_dir = os.path.join(root, "reports")
    os.makedirs(os.path.join(report_dir, "history"))
    store_path = os.path.join(report_dir, "history", "findings.json")
    os.mkfifo(store_path)
    a100 = fixture("a100-sxm4-v12.xml")
    inventory = {"all": {"hosts": {"node-ecc": host_vars(write_host_bin(root, "node-ecc", plant(a100, PERSISTENCE_ON, UNCORRECTABLE_ECC)))}}}
    proc, report = run_playbook(inventory, report_dir, extra_vars={"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND}, timeout=120)
    assert report is not None, proc.stdout + proc.stderr
    store = report["findings_store"]
    assert store["set_aside"].startswith(store_path + ".bad-") and "is a FIFO" in store["problems"][0], store
    assert _ecc(report["findings"])["open"] is True and _ecc(_store(report_dir)["findings"])["times_seen"] == 1
