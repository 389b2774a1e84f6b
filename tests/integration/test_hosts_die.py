"""Hosts that die mid-run must not hang the run (docs/hosts_die.md), on real SSH hosts (tests/support/netns.py).

One real `ansible-playbook playbooks/doctor.yml` over five hosts, each a network namespace with its own sshd,
replaying recorded nvidia-smi output (tests/support/fleet.py). An ad-hoc run first leaves an SSH control master to
every host (ControlPersist, as an earlier task or run does). Then:

- node3's link goes down while doctor runs on it (its nvidia-smi takes the interface down): the connection Ansible
  holds goes silent, as when a node crashes or loses its link;
- node5's link goes down between the two runs, its control master still open;
- node4's Python hangs before the module starts (ansible_python_interpreter sleeps);
- node1 (healthy) and node2 (uncorrectable ECC) must still be judged.

Where a host dies the numbers are made small so the run ends in seconds: the keepalives are ansible.cfg's own
ssh_args with the two numbers made small (2 s, not 15), the connect timeout 3 s, doctor's deadline 5 s and the
margin 5 s. The stated bound for these settings: ServerAliveInterval x (ServerAliveCountMax + 1) + the connect
timeout = 9 s for a silent link, timeouts.total + margin = 10 s for a hung Python. The healthy hosts keep the
project's own settings. Without the keepalives, or without the task timeout, the run hangs far past 10 minutes
(the test stops it at OUTER_S).
"""

import configparser
import json
import os
import re
import shutil
import sys
import time

import pytest

from ansible_collections.continuum.hydra.tests.support import netns
from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    UNCORRECTABLE_ECC,
    fixture,
    plant,
    run_playbook,
    write_host_bin,
)
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

pytestmark = pytest.mark.integration

VENV_BIN = os.path.dirname(sys.executable)
ANSIBLE_DEFAULT_SSH_ARGS = "-C -o ControlMaster=auto -o ControlPersist=60s"  # ansible-core's own, when ansible.cfg sets none
KEEPALIVE = {"ServerAliveInterval": 2, "ServerAliveCountMax": 2}
CONNECT_S = 3  # SSH's connect timeout (ansible_ssh_timeout; 10 s by default), well below the task timeout as there
TOTAL_S, MARGIN_S = 5, 5
BOUND_S = max(KEEPALIVE["ServerAliveInterval"] * (KEEPALIVE["ServerAliveCountMax"] + 1) + CONNECT_S, TOTAL_S + MARGIN_S)
# Far above the bound and the run's own work (~15 s on 2 busy cores), far below the hang (> 10 min).
OUTER_S = 150


def project_ssh_args():
    """ansible.cfg's ssh_args with the keepalive made short: what production gets, in seconds rather than a minute."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(os.path.join(REPO, "ansible.cfg"))
    args = config.get("ssh_connection", "ssh_args", fallback=ANSIBLE_DEFAULT_SSH_ARGS)
    for key, value in KEEPALIVE.items():
        args = re.sub(r"%s=\d+" % key, "%s=%d" % (key, value), args)
    return args


def _env(report_dir):
    return dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
                HYDRA_REPORT_DIR=str(report_dir), ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))


@pytest.fixture(scope="module")
def dying_fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("hosts_die")
    a100 = fixture("a100-sxm4-v12.xml")
    ip = shutil.which("ip", path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin") or "ip"
    with netns.beds(root) as make:
        bed = make(5)
        bins = {
            "node1": write_host_bin(str(root), "node1", plant(a100, PERSISTENCE_ON)),
            "node2": write_host_bin(str(root), "node2", plant(a100, PERSISTENCE_ON, UNCORRECTABLE_ECC)),
            "node3": write_host_bin(str(root), "node3", plant(a100, PERSISTENCE_ON)),
            "node4": write_host_bin(str(root), "node4", plant(a100, PERSISTENCE_ON)),
            "node5": write_host_bin(str(root), "node5", plant(a100, PERSISTENCE_ON)),
        }
        # node3 loses its link in the middle of doctor: the first nvidia-smi call takes its interface down.
        smi = os.path.join(bins["node3"], "nvidia-smi")
        with open(smi) as handle:
            replay = handle.read().split("\n", 1)[1]
        with open(smi, "w") as handle:
            handle.write("#!/bin/sh\n%s link set %s down\n%s" % (ip, netns.IFACE, replay))
        hang = root / "hanging-python"
        hang.write_text("#!/bin/sh\nexec sleep 3600\n")
        hang.chmod(0o755)
        host_vars = dict((name, {"hydra_environment": {"PATH": "%s:/usr/bin:/bin" % path}}) for name, path in bins.items())
        # The short numbers only where a host dies; the healthy hosts run with the project's own settings.
        for name in ("node3", "node5"):
            host_vars[name].update(ansible_ssh_args=project_ssh_args(), ansible_ssh_timeout=CONNECT_S)
        host_vars["node4"].update(ansible_python_interpreter=str(hang), hydra_timeouts={"total": TOTAL_S}, hydra_task_timeout_margin=MARGIN_S)
        inventory = bed.inventory(root / "inventory.yml", host_vars=host_vars, group_vars={"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND})
        report_dir = root / "reports"
        env = _env(report_dir)
        # An earlier run: a control master to every host stays open (ControlPersist).
        first, killed = netns.run_bounded([os.path.join(VENV_BIN, "ansible"), "-i", str(inventory), "all", "-m", "ansible.builtin.ping",
                                           "-e", "ansible_python_interpreter=%s" % bed.python], timeout=OUTER_S, env=env, cwd=REPO)
        assert not killed and first.stdout.count("SUCCESS") == 5, first.stdout[-3000:] + first.stderr[-3000:]
        bed.link_down("node5")
        started = time.monotonic()
        proc, killed = netns.run_bounded([os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inventory),
                                          os.path.join(REPO, "playbooks", "doctor.yml")], timeout=OUTER_S, env=env, cwd=REPO)
        elapsed = time.monotonic() - started
        report_path = report_dir / "fleet-report.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        print("doctor.yml over the dying fleet: %.1f s (bound %d s)" % (elapsed, BOUND_S))
        yield {"proc": proc, "killed": killed, "elapsed": elapsed, "report": report}


def test_the_run_ends_and_writes_the_report(dying_fleet):
    proc = dying_fleet["proc"]
    assert not dying_fleet["killed"], "the run hung: stopped after %d s (the bound is %d s)\n%s" % (
        OUTER_S, BOUND_S, proc.stdout[-3000:])
    assert dying_fleet["report"] is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert dying_fleet["report"]["totals"]["hosts"] == 5


def test_a_host_whose_link_dies_is_unreachable_with_the_reason(dying_fleet):
    hosts = (dying_fleet["report"] or {}).get("hosts") or {}
    for name in ("node3", "node5"):  # mid-doctor, and between the runs
        assert hosts[name]["status"] == "unreachable" and hosts[name]["doctor"] is None, (name, hosts[name])
        assert "ssh" in hosts[name]["message"].lower(), hosts[name]["message"]


def test_a_host_whose_python_hangs_fails_at_the_task_timeout_with_the_reason(dying_fleet):
    entry = ((dying_fleet["report"] or {}).get("hosts") or {})["node4"]
    assert entry["status"] == "task_failed" and entry["doctor"] is None
    assert entry["message"].startswith("Check host health and configuration: timed out after %d s" % (TOTAL_S + MARGIN_S)), entry


def test_the_other_hosts_are_judged(dying_fleet):
    hosts = (dying_fleet["report"] or {}).get("hosts") or {}
    assert hosts["node1"]["status"] == "healthy"
    assert hosts["node2"]["status"] == "failed" and hosts["node2"]["failing_checks"] == ["gpu.ecc_errors"]
    assert dying_fleet["report"]["totals"] == {"hosts": 5, "healthy": 1, "warning": 0, "failed": 1, "error": 0, "unreachable": 2,
                                               "task_failed": 1}


def test_a_play_that_matches_no_host_writes_a_report_of_none_and_says_so(tmp_path):
    report_dir = tmp_path / "reports"
    report_dir.mkdir()
    inventory = {"all": {"hosts": {"gpu-1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}
    proc, report = run_playbook(inventory, str(report_dir), extra_vars={"hydra_hosts": "rack-9"}, timeout=120)
    assert report is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert report["totals"]["hosts"] == 0 and report["hosts"] == {}
    said = [line for line in proc.stdout.splitlines() if "no host matched" in line]
    assert len(said) == 1 and "'rack-9'" in said[0], proc.stdout[-3000:]
    assert "All hosts healthy" not in proc.stdout
