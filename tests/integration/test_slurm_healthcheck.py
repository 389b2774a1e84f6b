"""roles/slurm_healthcheck installed by a real ansible-playbook into a temp root, then its program run directly.

The program runs as slurmd would run it: a subprocess with SLURMD_NODENAME set, on a Python without Ansible where
the machine has one (/usr/bin/python3), with a fake `nvidia-smi` replaying a real recording (a copy with
uncorrectable ECC errors planted for the failing node, or one that hangs) and a fake `scontrol` that records its
calls; then against the real slurmctld/slurmd of tests/utils/slurm_cluster.sh with the real scontrol, where every
assertion reads `scontrol show node -o`.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor_run
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import healthcheck as last_probe
from ansible_collections.continuum.hydra.tests.support.fake_scontrol import read_state, write_fake_scontrol
from ansible_collections.continuum.hydra.tests.support.fleet import UNCORRECTABLE_ECC, fixture, plant, write_host_bin
from ansible_collections.continuum.hydra.tests.support.helpers import REPO, read_fixture
from ansible_collections.continuum.hydra.tests.support.role_run import run_role
from ansible_collections.continuum.hydra.tests.support.slurm_cluster import node_states, running_cluster, scontrol

pytestmark = pytest.mark.integration

ONLY = ["gpu.ecc_errors", "driver.nvidia_smi"]
NVIDIA_SMI_TIMEOUT = 3


def _python_without_ansible():
    """The system Python when it has no Ansible (the node case), else this one."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system and subprocess.run([system, "-c", "import ansible"], capture_output=True, check=False).returncode != 0:
        return system
    return sys.executable


def role_vars(root, **extra):
    values = {
        "slurm_healthcheck_python": _python_without_ansible(),
        "slurm_healthcheck_lib_dir": os.path.join(root, "lib"),
        "slurm_healthcheck_bin_dir": os.path.join(root, "sbin"),
        "slurm_healthcheck_config_path": os.path.join(root, "etc", "healthcheck.json"),
        "slurm_healthcheck_state_dir": os.path.join(root, "state"),
        "slurm_healthcheck_only": ONLY,
        "slurm_healthcheck_timeouts": {"nvidia_smi": NVIDIA_SMI_TIMEOUT},
    }
    values.update(extra)
    return values


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    root = str(tmp / "root")
    started = time.time()
    first = run_role(tmp, "slurm_healthcheck", role_vars(root), "slurm_healthcheck_result")
    assert first.rc == 0, first.output[-3000:]
    return {"root": root, "first": first, "tmp": tmp, "result": first.result, "started": started}


@pytest.fixture(scope="module")
def bins(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("node-bins"))
    a100 = fixture("a100-sxm4-v12.xml")
    return {"pass": write_host_bin(os.path.join(root, "pass"), "gpu-a", a100),
            "ecc": write_host_bin(os.path.join(root, "ecc"), "gpu-a", plant(a100, UNCORRECTABLE_ECC)),
            "hang": write_host_bin(os.path.join(root, "hang"), "gpu-a", hang=True)}


def changed_tasks(output):
    """The names of the role's tasks that reported changed, in order."""
    changed, task = [], None
    for line in output.splitlines():
        match = re.match(r"^TASK \[continuum\.hydra\.slurm_healthcheck : (.*?)\] \*", line)
        if match or line.startswith("TASK ["):
            task = match.group(1) if match else None
        elif line.startswith("changed: ") and task and task not in changed:
            changed.append(task)
    return changed


def sources_changed_since(when):
    tree = os.path.join(REPO, "plugins", "module_utils")
    return any(os.stat(os.path.join(d, f)).st_mtime >= when for d, _s, files in os.walk(tree) for f in files if f.endswith(".py"))


def run_program(installed, bindir, node="node1", program="hydra-healthcheck", env=None, timeout=120):
    run_env = {"PATH": "%s:/usr/bin:/bin" % bindir}
    if node:
        run_env["SLURMD_NODENAME"] = node
    run_env.update(env or {})
    start = time.monotonic()
    proc = subprocess.run([os.path.join(installed["root"], "sbin", program)], env=run_env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    proc.elapsed = time.monotonic() - start
    return proc


def last_json(installed):
    with open(os.path.join(installed["root"], "state", "healthcheck", "last.json")) as handle:
        return json.load(handle)


def node_bin(tmp_path, bins, kind, nodes):
    """A bin dir with the fake nvidia-smi of `kind` and a fake scontrol knowing `nodes`; returns (dir, state path)."""
    bindir = str(tmp_path / "bin")
    shutil.copytree(bins[kind], bindir, symlinks=True)
    return bindir, write_fake_scontrol(bindir, nodes)


def test_role_installs_the_program_config_and_wrappers_idempotently(installed, tmp_path):
    root, result = installed["root"], installed["result"]
    assert installed["first"].changed > 0
    for name in ("hydra-healthcheck", "hydra-healthcheck-prolog", "hydra-healthcheck-epilog"):
        assert os.access(os.path.join(root, "sbin", name), os.X_OK)
    with open(os.path.join(root, "etc", "healthcheck.json")) as handle:
        config = json.load(handle)
    assert config["level"] == "quick" and config["only"] == ONLY and config["drain_on_error"] is False
    assert config["scontrol_path"] is None and config["state_dir"] == os.path.join(root, "state")
    assert result["state_file"] == os.path.join(root, "state", "healthcheck", "last.json")
    assert result["conf_lines"] == ["HealthCheckProgram=%s/sbin/hydra-healthcheck" % root, "HealthCheckInterval=300",
                                    "HealthCheckNodeState=ANY"]
    assert "HealthCheckProgram=%s/sbin/hydra-healthcheck" % root in installed["first"].output
    again = run_role(tmp_path, "slurm_healthcheck", role_vars(root), "slurm_healthcheck_result")
    assert again.rc == 0, again.output[-3000:]
    changed = changed_tasks(again.output)
    if changed == ["Copy the zipapp"] and sources_changed_since(installed["started"]):
        changed = []  # another edit of plugins/module_utils meanwhile: a new zipapp is right
    assert changed == [], again.output[-3000:]


def test_role_writes_slurm_conf_only_when_asked_and_previews_in_check_mode(installed, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    extra = {"slurm_healthcheck_manage_conf": True, "slurm_healthcheck_slurm_conf": str(conf),
             "slurm_healthcheck_conf_prolog": True}
    preview = run_role(tmp_path, "slurm_healthcheck", role_vars(installed["root"], **extra), "slurm_healthcheck_result",
                       check=True)
    assert preview.rc == 0 and "+HealthCheckProgram=" in preview.output and conf.read_text() == "ClusterName=x\n"
    applied = run_role(tmp_path, "slurm_healthcheck", role_vars(installed["root"], **extra), "slurm_healthcheck_result")
    assert applied.rc == 0 and applied.result["conf_changed"] is True, applied.output[-4000:]
    text = conf.read_text()
    assert "# BEGIN continuum.hydra slurm_healthcheck" in text
    assert "Prolog=%s/sbin/hydra-healthcheck-prolog" % installed["root"] in text


def test_healthy_node_is_left_alone(installed, bins, tmp_path):
    bindir, state = node_bin(tmp_path, bins, "pass", {"node1": ("IDLE", None)})
    proc = run_program(installed, bindir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_state(state)["calls"] == [] and read_state(state)["nodes"]["node1"]["state"] == "IDLE"
    last = last_json(installed)
    assert (last["exit_code"], last["drained"], last["reason"], last["node"]) == (0, False, None, "node1")
    assert last["level"] == "quick" and [c["status"] for c in last["checks"]] == ["PASS", "PASS"]


def test_ecc_fault_drains_the_node_named_by_slurmd_nodename(installed, bins, tmp_path):
    bindir, state = node_bin(tmp_path, bins, "ecc", {"node7": ("IDLE", None), "node1": ("IDLE", None)})
    proc = run_program(installed, bindir, node="node7")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    calls = read_state(state)["calls"]
    assert calls[0] == ["show", "node", "node7", "-o"] and len(calls) == 2
    assert calls[1][:3] == ["update", "nodename=node7", "state=drain"]
    assert calls[1][3].startswith("reason=hydra: gpu.ecc_errors: ") and len(calls[1]) == 4
    nodes = read_state(state)["nodes"]
    assert nodes["node7"]["state"] == "IDLE+DRAIN" and nodes["node1"]["state"] == "IDLE"
    last = last_json(installed)
    assert (last["exit_code"], last["drained"], last["action"]) == (1, True, "drained")
    assert "reason=" + last["reason"] == calls[1][3]


def test_admin_drained_node_is_left_alone(installed, bins, tmp_path):
    bindir, state = node_bin(tmp_path, bins, "ecc", {"node2": ("IDLE+DRAIN", "admin: bad fan")})
    proc = run_program(installed, bindir, node="node2")
    assert proc.returncode == 1 and "drained by someone else (admin: bad fan)" in proc.stdout
    assert read_state(state)["calls"] == [["show", "node", "node2", "-o"]]
    assert read_state(state)["nodes"]["node2"] == {"state": "IDLE+DRAIN", "reason": "admin: bad fan"}


def test_hanging_nvidia_smi_exits_2_within_the_deadline_and_drains_nothing(installed, bins, tmp_path):
    bindir, state = node_bin(tmp_path, bins, "hang", {"node1": ("IDLE", None)})
    proc = run_program(installed, bindir)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.elapsed < NVIDIA_SMI_TIMEOUT + 10, proc.elapsed
    assert read_state(state)["calls"] == []
    assert "timed out" in json.dumps(last_json(installed)["checks"])


def test_prolog_wrapper_fails_the_prolog_and_calls_no_scontrol(installed, bins, tmp_path):
    bindir, state = node_bin(tmp_path, bins, "ecc", {"node1": ("IDLE", None)})
    proc = run_program(installed, bindir, program="hydra-healthcheck-prolog")
    assert proc.returncode == 1 and read_state(state)["calls"] == []
    assert (last_json(installed)["mode"], last_json(installed)["action"]) == ("prolog", "exit_only")


def test_xid_79_beside_a_malformed_nvrm_line_drains_the_node(installed, tmp_path):
    # Issue 23: one NVRM line with an impossible date (a copy of a real line, month 13) must not hide the real
    # Xid 79 after it: the installed program, run as slurmd runs it, exits 1 and drains its node.
    xid_lines = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()
    log = "\n".join(read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt").splitlines() + [
        "2026-13-22T13:20:00,000000+00:00 " + xid_lines[-1].split("] ", 1)[1],
        "2026-11-22T13:20:01,000000+00:00 " + xid_lines[1].split("kernel: ", 1)[1]]) + "\n"
    bindir = write_host_bin(str(tmp_path / "bins"), "node1", kernel_log=log)
    state = write_fake_scontrol(bindir, {"node1": ("IDLE", None)})
    config = tmp_path / "xid.json"
    config.write_text(json.dumps({"only": ["gpu.xid_errors"], "level": "standard", "state_dir": str(tmp_path / "state")}))
    proc = subprocess.run([os.path.join(installed["root"], "sbin", "hydra-healthcheck"), "--config", str(config)],
                          env={"PATH": "%s:/usr/bin:/bin" % bindir, "SLURMD_NODENAME": "node1"}, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert read_state(state)["nodes"]["node1"]["state"] == "IDLE+DRAIN"
    assert read_state(state)["calls"][-1][3].startswith("reason=hydra: gpu.xid_errors: XID 79")


def test_against_real_slurmctld_and_slurmd(installed, bins, tmp_path_factory):
    with running_cluster(str(tmp_path_factory.mktemp("slurm")), 2) as conf:
        env = {"SLURM_CONF": conf}
        scontrol(conf, "update", "nodename=node2", "state=drain", "reason=admin: bad fan")
        failing = run_program(installed, bins["ecc"], node="node1", env=env)
        assert failing.returncode == 1, failing.stdout + failing.stderr
        states = node_states(conf)
        assert states["node1"][0] and states["node1"][1].startswith("hydra: gpu.ecc_errors: "), states
        assert states["node1"][1] == last_json(installed)["reason"]
        # What the next doctor run reads from the program's last.json: doctor itself, given the role's state dir.
        state_dir = os.path.join(installed["root"], "state")
        data = last_probe.probe_healthcheck_last({"state_dir": state_dir, "timeouts": {"command": 5}})
        chk = [c for c in CATALOGUE if c.id == "slurm.healthcheck"][0]
        assert registry.evaluate(chk, {"healthcheck_last": {"status": "ok", "data": data, "reason": None}}, {})["status"] == "FAIL"
        [judged] = doctor_run.run(only=["slurm.healthcheck"], state_dir=state_dir, persist=False)["checks"]
        assert judged["status"] == "FAIL" and "gpu.ecc_errors" in judged["message"], judged
        admin = run_program(installed, bins["ecc"], node="node2", env=env)
        assert admin.returncode == 1 and node_states(conf)["node2"] == (True, "admin: bad fan")
        # Healthy again: hydra's drain stays (resuming is slurm_gate's job, behind its brake).
        healthy = run_program(installed, bins["pass"], node="node1", env=env)
        assert healthy.returncode == 0 and node_states(conf)["node1"] == states["node1"]


_FULL_DISK_SCRIPT = r'''
mount -t tmpfs -o size=4m,nr_inodes=64 none "$STATE" || exit 90
PATH="$PASS_BIN:/usr/bin:/bin" "$PROGRAM" --config "$CONFIG" > "$OUT/healthy.txt" 2>&1; echo $? > "$OUT/healthy.rc"
i=0
while touch "$STATE/fill$i" 2>/dev/null; do i=$((i+1)); done
PATH="$ECC_BIN:/usr/bin:/bin" "$PROGRAM" --config "$CONFIG" > "$OUT/failing.txt" 2>&1; echo $? > "$OUT/failing.rc"
"$PYTHON" -c '
import json, os, sys
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run
[judged] = run.run(only=["slurm.healthcheck"], state_dir=os.environ["STATE"], persist=False)["checks"]
print(json.dumps(judged))
' > "$OUT/judged.json" 2>&1
'''


def test_a_record_that_cannot_be_written_never_leaves_a_stale_healthy_one(installed, bins, tmp_path):
    # Issue 23: the node is judged FAIL and drained, but last.json cannot be written (the state dir's filesystem is
    # full: a tmpfs out of inodes, in a private mount namespace) - the healthy record of the run before stayed, and
    # check slurm.healthcheck said PASS for a node just drained.
    state_dir, out = tmp_path / "state", tmp_path / "out"
    state_dir.mkdir()
    out.mkdir()
    config = tmp_path / "healthcheck.json"
    config.write_text(json.dumps({"only": ONLY, "state_dir": str(state_dir)}))
    ecc_bin, scontrol_state = node_bin(tmp_path, bins, "ecc", {"node1": ("IDLE", None)})
    env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "node1", "STATE": str(state_dir), "OUT": str(out),
           "CONFIG": str(config), "PASS_BIN": bins["pass"], "ECC_BIN": ecc_bin, "PYTHON": sys.executable,
           "PROGRAM": os.path.join(installed["root"], "sbin", "hydra-healthcheck"), "PYTHONPATH": os.path.join(REPO, "collections")}
    proc = subprocess.run(["unshare", "--mount", "sh", "-c", _FULL_DISK_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "healthy.rc").read_text().strip() == "0", (out / "healthy.txt").read_text()
    assert (out / "failing.rc").read_text().strip() == "1", (out / "failing.txt").read_text()
    assert read_state(scontrol_state)["nodes"]["node1"]["state"] == "IDLE+DRAIN"
    judged = json.loads((out / "judged.json").read_text())
    assert judged["status"] != "PASS", judged
    # Removing the stale record made room: this run's FAIL record was written after all, and says so.
    assert judged["status"] == "FAIL" and "gpu.ecc_errors" in judged["message"], judged
    assert "removed the previous record" in (out / "failing.txt").read_text()


def test_health_check_timeout_is_written_only_for_a_slurm_that_has_it(tmp_path):
    # Issue 27 item 7: HealthCheckTimeout came with Slurm 26.05 (SchedMD commit 74979c20b5); this machine's real slurmd
    # is 22.05, which would not know the key and stops the program after 60 s whatever slurm.conf says.
    root = str(tmp_path / "root")
    refused = run_role(tmp_path, "slurm_healthcheck", role_vars(root, slurm_healthcheck_timeout=120), "slurm_healthcheck_result")
    assert refused.rc != 0
    assert "HealthCheckTimeout needs Slurm 26.05 or later (this node runs 22.05" in refused.output, refused.output[-3000:]
    # A 26.05 node: the line is there, and the program's own deadline ends 20 s before it.
    newer = run_role(tmp_path, "slurm_healthcheck", role_vars(root, slurm_healthcheck_timeout=120,
                                                              slurm_healthcheck_slurm_version="26.05.0"), "slurm_healthcheck_result")
    assert newer.rc == 0, newer.output[-3000:]
    assert "HealthCheckTimeout=120" in newer.result["conf_lines"]
    with open(os.path.join(root, "etc", "healthcheck.json")) as handle:
        assert json.load(handle)["timeouts"] == {"nvidia_smi": NVIDIA_SMI_TIMEOUT, "total": 100}
    # slurm.conf(5): below HealthCheckInterval.
    above = run_role(tmp_path, "slurm_healthcheck", role_vars(root, slurm_healthcheck_timeout=300, slurm_healthcheck_slurm_version="26.05.0"),
                     "slurm_healthcheck_result")
    assert above.rc != 0 and "must be below slurm_healthcheck_interval (300)" in above.output
