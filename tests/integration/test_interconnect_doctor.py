"""Interconnect rates through real runs: GPUd's recorded H100 /sys/class/infiniband tree is planted over
/sys/class/infiniband (and a boot id over /proc/sys/kernel/random/boot_id) in a mount namespace of the test's own, where
a real `ansible-playbook playbooks/doctor.yml` runs network.ib_counters on localhost; counter deltas and resets are
planted in the tree between runs, and the fleet report, its history and its findings store are asserted."""

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.continuum.hydra.tests.support import interconnect as ic
from ansible_collections.continuum.hydra.tests.support.fleet import PLAYBOOK, VENV_BIN
from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare (mount namespace)")]

HOST = "node-ib"
BOOT_1 = "6f0c3b1e-0a5e-4a43-9d55-1b2c3d4e5f60"
BOOT_2 = "0b7d2c9a-61f1-4d0e-8c3b-77aa11bb22cc"


def _doctor(base, report_dir):
    """One doctor run in a mount namespace where base/ib is /sys/class/infiniband and base/boot_id the boot id."""
    inventory = {"all": {"hosts": {HOST: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}
    inv_path = os.path.join(report_dir, "inventory.yml")
    with open(inv_path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
               HYDRA_REPORT_DIR=report_dir, ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    playbook = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inv_path, PLAYBOOK,
                "-e", json.dumps({"hydra_only": ["network.ib_counters", "network.ib_ports"]})]
    script = ("mount -t tmpfs none /sys/class && mkdir /sys/class/infiniband && mount --bind %s /sys/class/infiniband && "
              "mount --bind %s /proc/sys/kernel/random/boot_id && exec %s" % (
                  shlex.quote(str(base / "ib")), shlex.quote(str(base / "boot_id")), " ".join(shlex.quote(a) for a in playbook)))
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, cwd=REPO, check=False)
    path = os.path.join(report_dir, "fleet-report.json")
    assert os.path.exists(path), proc.stdout + proc.stderr
    with open(path) as handle:
        report = json.load(handle)
    assert not list(schema_validator().iter_errors(report))
    with open(os.path.join(report_dir, "fleet-report.md")) as handle:
        markdown = handle.read()
    return report, markdown


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("interconnect")
    tree = ic.ib_root(base, "tree")
    os.rename(tree / "sys/class/infiniband", base / "ib")
    root = base / "ib"

    def counter(device, name, value=None, delta=None):
        path = root / device / "ports/1/counters" / name
        path.write_text("%d\n" % (value if value is not None else int(path.read_text()) + delta))

    (base / "boot_id").write_text(BOOT_1 + "\n")
    report_dir = str(base / "reports")
    os.makedirs(report_dir)
    out = [_doctor(base, report_dir)]                       # 1: first reading
    counter("mlx5_4", "symbol_error", delta=500)            # 2: 500 symbol errors, seconds apart: over 120 in the hour
    counter("mlx5_6", "link_downed", delta=1)
    out.append(_doctor(base, report_dir))
    counter("mlx5_4", "symbol_error", value=3)              # 3: cleared (perfquery -R): lower than the last run's
    out.append(_doctor(base, report_dir))
    (base / "boot_id").write_text(BOOT_2 + "\n")            # 4: a reboot; mlx5_5 reads higher than before anyway
    counter("mlx5_5", "symbol_error", delta=900)
    out.append(_doctor(base, report_dir))
    with open(os.path.join(report_dir, "history", "findings.json")) as handle:
        store = json.load(handle)
    return out, store


def _section(report):
    return report["analysis"]["interconnect"]


def test_the_first_run_reports_lifetime_totals_only(runs):
    report, markdown = runs[0][0]
    section = _section(report)
    assert section["hosts"] == {HOST: "first reading"} and section["rates"] == []
    checks = dict((c["id"], c) for c in report["hosts"][HOST]["doctor"]["checks"])
    assert checks["network.ib_counters"]["status"] == "WARN"   # the recording's saturated counters
    assert report["hosts"][HOST]["doctor"]["environment"]["boot_id"] == BOOT_1
    assert "## Interconnect" in markdown and "1 first reading (lifetime totals only)" in markdown


def test_a_planted_delta_is_a_rate_verdict_an_action_and_a_finding(runs):
    report, markdown = runs[0][1]
    section = _section(report)
    assert section["hosts"] == {HOST: "compared"}
    breaches = [(r["subject"], r["counter"], r["delta"], r["status"], r["unit"]) for r in section["rates"] if r["status"] != "PASS"]
    assert breaches == [("mlx5_6/1", "link_downed", 1, "FAIL", "count"), ("mlx5_4/1", "symbol_error", 500, "FAIL", "hour")]
    (symbol,) = [r for r in section["rates"] if r["counter"] == "symbol_error"]
    assert symbol["rate"] == 500.0 and symbol["interval_h"] < 1.0   # seconds apart: counted against the whole hour
    (action,) = [a for a in report["actions"] if a["check_id"] == "interconnect.ib_errors"]
    assert action["subjects"] == ["%s mlx5_4/1" % HOST, "%s mlx5_6/1" % HOST] and "transceiver" in action["remediation"]
    assert [f["subject"] for f in section["flaps"]] == ["mlx5_6/1"]
    assert "| FAIL | %s | mlx5\\_4/1 | symbol\\_error | 500/hour | 120/hour |" % HOST.replace("_", "\\_") in markdown


def test_a_cleared_counter_and_a_reboot_restart_the_interval(runs):
    cleared = _section(runs[0][2][0])
    assert [(r["subject"], r["reason"]) for r in cleared["resets"]] == [
        ("mlx5_4/1", "symbol_error lower than the last run's (cleared, driver reloaded or wrapped)")]
    assert [r for r in cleared["rates"] if r["subject"] == "mlx5_4/1"] == []
    rebooted = _section(runs[0][3][0])
    assert rebooted["hosts"] == {HOST: "reboot since the last run"}
    assert rebooted["rates"] == [] and {r["reason"] for r in rebooted["resets"]} == {"reboot since the last run"}
    assert len(rebooted["resets"]) == 9   # every port's interval restarts


def test_the_findings_last_and_count_the_clean_runs(runs):
    _out, store = runs
    found = dict(((f["check_id"], f["subject"]), f) for f in store["findings"] if f["check_id"].startswith("interconnect."))
    assert set(found) == {("interconnect.ib_errors", "mlx5_4/1"), ("interconnect.ib_errors", "mlx5_6/1"), ("interconnect.flap", "mlx5_6/1")}
    assert all(f["open"] and f["clean_runs"] == 2 and f["clears_after"] == 3 for f in found.values())
