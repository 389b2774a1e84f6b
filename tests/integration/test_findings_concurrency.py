"""Two runs sharing a report directory, and playbooks/acknowledge.yml during a run: no update is lost (issue 23).

Real ansible-playbook runs of playbooks/doctor.yml (tests/support/fleet.py's fake nvidia-smi per host) and of
playbooks/acknowledge.yml. The first run is held right before its callback commits the findings store
(tests/support/interleave.py: an audit hook on the rename, the production code unchanged): it has read the store
and folded its own results. The second process then runs; once it has finished (no lock: it wrote its store) or
waits on the store's lock, the first is let go. Without the lock the first run's rename drops what the second
wrote; with it the second reads the first run's store and adds to it.
"""

import json
import os
import signal
import subprocess

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
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator
from ansible_collections.continuum.hydra.tests.support.interleave import RenamePause, openers, wait_for

pytestmark = pytest.mark.integration

ACK = os.path.join(REPO, "playbooks", "acknowledge.yml")
ECC = "gpu.ecc_errors"
RUN_TIMEOUT = 300


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """An inventory of two hosts, each with one GPU reporting uncorrectable ECC errors."""
    root = str(tmp_path_factory.mktemp("concurrency-fleet"))
    failing = plant(fixture("a100-sxm4-v12.xml"), PERSISTENCE_ON, UNCORRECTABLE_ECC)
    inventory = {"all": {"hosts": {name: host_vars(write_host_bin(root, name, failing)) for name in ("node-a", "node-b")}}}
    path = os.path.join(root, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    return path


def _env(report_dir, **extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
               HYDRA_REPORT_DIR=report_dir, ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    env.update(extra)
    return env


def _doctor(inventory, limit):
    return [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory, PLAYBOOK, "--limit", limit,
            "-e", json.dumps({"hydra_only": GPU_ONLY}), "-e", json.dumps({"hydra_exclude": MACHINE_BOUND})]


def _ack(host):
    return [os.path.join(VENV_BIN, "ansible-playbook"), ACK,
            "-e", json.dumps({"hydra_ack_hosts": [host], "hydra_ack_checks": [ECC], "hydra_ack_note": "reset"})]


def _start(argv, env):
    return subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finish(proc):
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return proc.returncode, out + err


def _store(report_dir):
    with open(os.path.join(report_dir, "history", "findings.json")) as handle:
        return json.load(handle)


def _ecc(store, host):
    found = [f for f in store["findings"] if f["host"] == host and f["check_id"] == ECC]
    assert len(found) == 1, store["findings"]
    return found[0]


def _interleave(tmp_path, first_argv, second_argv, report_dir):
    """Run ``first`` until it is about to commit the findings store, then ``second`` until it has finished or waits
    on the store's lock, then let ``first`` go. Returns ((rc, output) of first, (rc, output) of second)."""
    store = os.path.join(report_dir, "history", "findings.json")
    pause = RenamePause(tmp_path / "pause", store)
    first = _start(first_argv, pause.env(_env(report_dir)))
    second = None
    try:
        held = pause.wait_paused(first, RUN_TIMEOUT)
        second = _start(second_argv, _env(report_dir))
        lock = store + ".lock"
        wait_for(lambda: second.poll() is not None or openers(lock) - {held}, RUN_TIMEOUT, "the second run to finish or wait on the lock")
    finally:
        pause.release()
    results = _finish(first), _finish(second) if second is not None else (None, "")
    return results


def test_two_runs_sharing_a_report_dir_keep_both_runs_findings(fleet, tmp_path):
    # A scheduled run (node-a) and a manual one (node-b) end at the same time, in one report directory.
    report_dir = str(tmp_path / "reports")
    (rc_a, out_a), (rc_b, out_b) = _interleave(tmp_path, _doctor(fleet, "node-a"), _doctor(fleet, "node-b"), report_dir)
    assert rc_a == 0 and rc_b == 0, out_a[-3000:] + out_b[-3000:]
    store = _store(report_dir)
    assert _ecc(store, "node-a")["open"] and _ecc(store, "node-b")["open"], store["findings"]
    with open(os.path.join(report_dir, "fleet-report.json")) as handle:
        report = json.load(handle)  # written last by node-a's run: its view of the store had node-b's finding
    assert report["findings_store"] == {"path": os.path.join(report_dir, "history", "findings.json"), "updated": True,
                                        "set_aside": None, "problems": []}
    schema_validator().validate(report)


def test_acknowledge_during_a_run_is_kept(fleet, tmp_path):
    report_dir = str(tmp_path / "reports")
    rc, out = _finish(_start(_doctor(fleet, "node-a"), _env(report_dir)))
    assert rc == 0 and _ecc(_store(report_dir), "node-a")["open"], out[-3000:]
    # A run over node-b ends while an operator acknowledges node-a's finding.
    (rc_run, out_run), (rc_ack, out_ack) = _interleave(tmp_path, _doctor(fleet, "node-b"), _ack("node-a"), report_dir)
    assert rc_run == 0 and rc_ack == 0, out_run[-3000:] + out_ack[-3000:]
    assert "closed 1 finding: node-a gpu.ecc_errors" in out_ack
    store = _store(report_dir)
    acked = _ecc(store, "node-a")
    assert acked["open"] is False and acked["acknowledged"]["note"] == "reset", acked
    assert _ecc(store, "node-b")["open"] is True


def test_a_run_locked_out_says_so_in_the_report_and_leaves_the_store_whole(fleet, tmp_path):
    report_dir = str(tmp_path / "reports")
    rc, out = _finish(_start(_doctor(fleet, "node-a"), _env(report_dir)))
    assert rc == 0, out[-3000:]
    store_path = os.path.join(report_dir, "history", "findings.json")
    with open(store_path) as handle:
        before = handle.read()
    history_lock = os.path.join(report_dir, "history", "fleet-history.lock")
    snapshots = sorted(n for n in os.listdir(os.path.join(report_dir, "history")) if n.startswith("fleet-history-"))
    # Another process holds the store's and the history's locks (util-linux flock, the same flock(2) lock) for longer
    # than this run waits.
    holders = [subprocess.Popen(["flock", "--exclusive", lock, "-c", "echo held; exec sleep 600"],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
               for lock in (store_path + ".lock", history_lock)]
    try:
        assert [holder.stdout.readline() for holder in holders] == ["held\n", "held\n"]
        rc, out = _finish(_start(_doctor(fleet, "node-b"), _env(report_dir, HYDRA_STATE_LOCK_TIMEOUT="1")))
        ack_rc, ack_out = _finish(_start(_ack("node-a"), _env(report_dir, HYDRA_STATE_LOCK_TIMEOUT="1")))
    finally:
        for holder in holders:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
    assert rc == 0, out[-3000:]
    line = "findings: %s not updated: %s.lock is locked by another run; gave up after 1 s" % (store_path, store_path)
    with open(os.path.join(report_dir, "fleet-report.json")) as handle:
        report = json.load(handle)
    assert report["findings_store"] == {"path": store_path, "updated": False, "set_aside": None, "problems": [line]}
    # The report still lists the stored finding and this run's own.
    assert {f["host"] for f in report["findings"] if f["check_id"] == ECC} == {"node-a", "node-b"}
    assert line in out
    with open(os.path.join(report_dir, "fleet-report.md")) as handle:
        markdown = [text for text in handle.read().splitlines() if text.startswith("> **Problem:** findings: ")]
    assert len(markdown) == 1 and "gave up after 1 s" in markdown[0], markdown
    with open(os.path.join(report_dir, "fleet-report.html")) as handle:
        assert '<p class="problem findings-store">%s</p>' % line in handle.read()
    with open(store_path) as handle:
        assert handle.read() == before
    # History: neither read nor written this run, in one line of the report's problems.
    assert "history: not read or written this run: %s is locked by another run; gave up after 1 s" % history_lock \
        in report["analysis"]["problems"]
    assert sorted(n for n in os.listdir(os.path.join(report_dir, "history")) if n.startswith("fleet-history-")) == snapshots
    # acknowledge.yml, locked out too: one line, nothing written.
    assert ack_rc == 2 and "%s.lock is locked by another run; gave up after 1 s" % store_path in ack_out, ack_out[-3000:]
    schema_validator().validate(report)
