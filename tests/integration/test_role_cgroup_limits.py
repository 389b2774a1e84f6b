"""The continuum.hydra.cgroup_limits role: cgroup v1 for real on this machine, v2 on a tree laid out like /sys/fs/cgroup.

This machine is cgroup v1 (the v2 mount has no controllers), so the v2 path is exercised against a directory
tree with the files a cgroup2 mount has; v1 limits are written to the kernel and a memory limit is shown to bite.
"""

import os
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.continuum.hydra.tests.support.role_run import run_role

pytestmark = pytest.mark.integration

V1_ROOT = "/sys/fs/cgroup"


def snapshot(root):
    out = {}
    for directory, _dirs, files in os.walk(root):
        out[directory] = None
        for name in files:
            with open(os.path.join(directory, name)) as handle:
                out[os.path.join(directory, name)] = handle.read()
    return out


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def read(path):
    with open(path) as handle:
        return handle.read().strip()


@pytest.fixture
def v2_tree(tmp_path):
    """A cgroup2 root with a systemd-like user slice, as the files read on a v2 host."""
    root = tmp_path / "cgroup"
    write(str(root / "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n")
    write(str(root / "cgroup.subtree_control"), "")
    write(str(root / "cgroup.procs"), "1\n")
    write(str(root / "user.slice" / "cgroup.controllers"), "cpu io memory pids\n")
    write(str(root / "user.slice" / "cgroup.subtree_control"), "cpu io memory pids\n")
    user = root / "user.slice" / "user-1000.slice"
    for name, text in (("cgroup.controllers", "cpu io memory pids\n"), ("memory.max", "max\n"), ("memory.high", "max\n"),
                       ("cpu.max", "max 100000\n"), ("io.max", ""), ("cgroup.procs", "")):
        write(str(user / name), text)
    return str(root)


@pytest.fixture
def noisy_process(tmp_path):
    """A running process with a name of its own (a copy of sleep), for matching by name."""
    name = "hydranoisy%d" % (os.getpid() % 10000)
    binary = str(tmp_path / name)
    shutil.copy("/bin/sleep", binary)
    proc = subprocess.Popen([binary, "300"])
    yield name, proc.pid
    proc.kill()
    proc.wait()


def test_v2_check_mode_writes_nothing(tmp_path, v2_tree, noisy_process):
    before = snapshot(v2_tree)
    run = run_role(tmp_path, "cgroup_limits", {
        "cgroup_limits_root": v2_tree,
        "cgroup_limits_limits": [{"name": "noisy", "processes": [noisy_process[0]], "memory_max": "512M"}],
    }, "cgroup_limits_result", check=True)
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 1
    assert snapshot(v2_tree) == before
    assert {"action": "write", "path": "hydra.slice/noisy/memory.max", "before": "max", "after": 536870912} in run.result["changes"]
    assert {"action": "move", "path": "hydra.slice/noisy/cgroup.procs", "pids": [noisy_process[1]]} in run.result["changes"]
    assert "+    \"hydra.slice/noisy/memory.max\": 536870912" in run.output


def test_v2_limits_processes_and_slices_then_is_idempotent(tmp_path, v2_tree, noisy_process):
    role_vars = {
        "cgroup_limits_root": v2_tree,
        "cgroup_limits_limits": [
            {"name": "noisy", "processes": [noisy_process[0]], "memory_max": "512M", "memory_high": "384M",
             "cpu_percent": 50, "io_max": [{"device": "8:0", "rbps": 10485760, "wiops": 200}]},
            {"cgroup": "user.slice/user-1000.slice", "memory_high": "4G", "cpu_percent": 200},
        ],
    }
    run = run_role(tmp_path, "cgroup_limits", role_vars, "cgroup_limits_result")
    assert run.rc == 0, run.output[-4000:]
    assert run.result["version"] == "v2"
    group = os.path.join(v2_tree, "hydra.slice", "noisy")
    assert read(os.path.join(group, "memory.max")) == "536870912"
    assert read(os.path.join(group, "memory.high")) == "402653184"
    assert read(os.path.join(group, "cpu.max")) == "50000 100000"
    assert read(os.path.join(group, "io.max")) == "8:0 rbps=10485760 wiops=200"
    assert read(os.path.join(group, "cgroup.procs")).split() == [str(noisy_process[1])]
    # Controllers enabled from the root down to the group's parent.
    for directory in (v2_tree, os.path.join(v2_tree, "hydra.slice")):
        assert read(os.path.join(directory, "cgroup.subtree_control")) == "+cpu +io +memory"
    user = os.path.join(v2_tree, "user.slice", "user-1000.slice")
    assert read(os.path.join(user, "memory.high")) == "4294967296"
    assert read(os.path.join(user, "memory.max")) == "max"
    assert read(os.path.join(user, "cpu.max")) == "200000 100000"
    # user.slice already had its controllers: nothing written there.
    assert read(os.path.join(v2_tree, "user.slice", "cgroup.subtree_control")) == "cpu io memory pids"

    before = snapshot(v2_tree)
    again = run_role(tmp_path, "cgroup_limits", role_vars, "cgroup_limits_result")
    assert again.rc == 0, again.output[-4000:]
    assert again.changed == 0 and again.result["changes"] == []
    assert snapshot(v2_tree) == before


def test_v2_noisy_processes_limited_by_severity(tmp_path, v2_tree, noisy_process):
    other = subprocess.Popen(["sleep", "300"])
    try:
        run = run_role(tmp_path, "cgroup_limits", {
            "cgroup_limits_root": v2_tree,
            "cgroup_limits_noisy_processes": [{"pid": noisy_process[1], "name": noisy_process[0], "severity": "fail"},
                                              {"pid": other.pid, "name": "sleep", "severity": "warn"}],
        }, "cgroup_limits_result")
        assert run.rc == 0, run.output[-4000:]
        fail_group = os.path.join(v2_tree, "hydra.slice", "noisy-fail")
        warn_group = os.path.join(v2_tree, "hydra.slice", "noisy-warn")
        # The role's default severity limits: fail is the harsher.
        assert read(os.path.join(fail_group, "cpu.max")) == "25000 100000"
        assert read(os.path.join(fail_group, "memory.max")) == str(4 * 1024 ** 3)
        assert read(os.path.join(warn_group, "cpu.max")) == "100000 100000"
        assert read(os.path.join(warn_group, "memory.high")) == str(8 * 1024 ** 3)
        assert read(os.path.join(fail_group, "cgroup.procs")) == str(noisy_process[1])
        assert read(os.path.join(warn_group, "cgroup.procs")) == str(other.pid)
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("limits, message", [
    ([{"name": "x", "memory_max": "lots"}], "limits[0].memory_max: 'lots' is not a size"),
    ([{"name": "x", "cgroup": "y", "cpu_percent": 10}], "limits[0]: give exactly one of name"),
    ([{"cgroup": "system.slice/nothere.service", "cpu_percent": 10}], "cgroup system.slice/nothere.service does not exist"),
    ([{"name": "x", "io_max": [{"device": "8:0", "rbps": -5}]}], "limits[0].io_max.rbps: -5 is not a positive whole number"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, v2_tree, limits, message):
    before = snapshot(v2_tree)
    run = run_role(tmp_path, "cgroup_limits", {"cgroup_limits_root": v2_tree, "cgroup_limits_limits": limits},
                   "cgroup_limits_result")
    assert run.rc != 0
    assert message in run.output
    assert "Traceback" not in run.output
    assert snapshot(v2_tree) == before


def test_v2_controller_missing_from_the_root_is_named(tmp_path, v2_tree):
    write(os.path.join(v2_tree, "cgroup.controllers"), "cpu memory pids\n")
    run = run_role(tmp_path, "cgroup_limits", {
        "cgroup_limits_root": v2_tree,
        "cgroup_limits_limits": [{"name": "x", "io_max": [{"device": "8:0", "rbps": 1000}]}],
    }, "cgroup_limits_result")
    assert run.rc != 0
    assert "controller io is not available in / (cgroup.controllers: cpu memory pids)" in run.output


def _v1_available():
    return os.access(os.path.join(V1_ROOT, "memory", "cgroup.procs"), os.W_OK) and \
        not os.path.exists(os.path.join(V1_ROOT, "cgroup.controllers"))


def _block_device():
    for name in sorted(os.listdir("/sys/block")):
        if not name.startswith(("loop", "ram", "zram")) and os.path.exists("/sys/block/%s/dev" % name):
            return read("/sys/block/%s/dev" % name)
    return read("/sys/block/%s/dev" % sorted(os.listdir("/sys/block"))[0])


@pytest.fixture
def v1_parent():
    if not _v1_available():
        pytest.skip("needs a writable cgroup v1 hierarchy at /sys/fs/cgroup (root, v1 or hybrid host)")
    parent = "hydra-test-%d" % os.getpid()
    yield parent
    for controller in ("memory", "cpu", "blkio"):
        base = os.path.join(V1_ROOT, controller, parent)
        for directory in (os.path.join(base, name) for name in ("noisy", "hog")):
            if os.path.isdir(directory):
                for _attempt in range(50):
                    try:
                        os.rmdir(directory)
                        break
                    except OSError:  # its processes are still exiting
                        time.sleep(0.1)
        if os.path.isdir(base):
            os.rmdir(base)


def test_v1_for_real_limits_moves_verifies_and_is_idempotent(tmp_path, v1_parent, noisy_process):
    device = _block_device()
    role_vars = {
        "cgroup_limits_parent": v1_parent,
        "cgroup_limits_limits": [{"name": "noisy", "processes": [noisy_process[0]], "memory_max": "64M",
                                  "cpu_percent": 20, "io_max": [{"device": device, "rbps": 1048576, "wiops": 100}]}],
    }
    check = run_role(tmp_path, "cgroup_limits", role_vars, "cgroup_limits_result", check=True)
    assert check.rc == 0, check.output[-4000:]
    assert check.changed == 1
    assert not os.path.exists(os.path.join(V1_ROOT, "memory", v1_parent))

    run = run_role(tmp_path, "cgroup_limits", role_vars, "cgroup_limits_result")
    assert run.rc == 0, run.output[-4000:]
    assert run.result["version"] == "v1"
    group = "/%s/noisy" % v1_parent
    assert read(os.path.join(V1_ROOT, "memory", v1_parent, "noisy", "memory.limit_in_bytes")) == str(64 * 1024 ** 2)
    assert read(os.path.join(V1_ROOT, "cpu", v1_parent, "noisy", "cpu.cfs_quota_us")) == "20000"
    blkio = os.path.join(V1_ROOT, "blkio", v1_parent, "noisy")
    assert "%s 1048576" % device in read(os.path.join(blkio, "blkio.throttle.read_bps_device")).splitlines()
    assert "%s 100" % device in read(os.path.join(blkio, "blkio.throttle.write_iops_device")).splitlines()
    # The kernel itself says where the process now is.
    memberships = dict((line.split(":")[1], line.split(":")[2]) for line in read("/proc/%d/cgroup" % noisy_process[1]).splitlines())
    assert memberships["memory"] == group and memberships["cpu"] == group and memberships["blkio"] == group

    again = run_role(tmp_path, "cgroup_limits", role_vars, "cgroup_limits_result")
    assert again.rc == 0, again.output[-4000:]
    assert again.changed == 0 and again.result["changes"] == []


def test_v1_memory_limit_bites(tmp_path, v1_parent):
    # A process that allocates 256 MiB once it has been moved into a group limited to 64 MiB is killed by the
    # kernel's OOM killer for the group (no swap on these machines).
    hog = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline(); b = bytearray(256 * 1024 * 1024); "
                            "print(len(b))"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        run = run_role(tmp_path, "cgroup_limits", {
            "cgroup_limits_parent": v1_parent,
            "cgroup_limits_limits": [{"name": "hog", "pids": [hog.pid], "memory_max": "64M"}],
        }, "cgroup_limits_result")
        assert run.rc == 0, run.output[-4000:]
        out, _err = hog.communicate(b"go\n", timeout=60)
        assert hog.returncode == -9, "the hog was not OOM-killed (rc %s, printed %r)" % (hog.returncode, out)
    finally:
        if hog.poll() is None:
            hog.kill()
            hog.wait()
