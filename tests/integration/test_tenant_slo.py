"""Tenant SLOs end to end: doctor's tenant.slo over real runs, and the tenant_guard role throttling a real dd.

The tenant is a real ``sleep`` whose metric file the test writes; the bully a real ``dd`` writing with O_DIRECT to a
file on the machine's real block device (/tmp is ext4 on a virtio disk here; O_DIRECT needs a block device, tmpfs
refuses it). Rates are measured from /proc/<pid>/io.

Both run in a PID namespace of the test's own (tests/support/pidns.py): tenant.slo ranks every process it can see by
I/O, and on this shared machine other jobs' writes would outrank the test's dd, or be throttled by the guard.

Enforcement is real where the host allows it: on this cgroup v1 (hybrid) machine tier 1 writes
blkio.throttle.{read,write}_bps_device for the disk's MAJ:MIN and moves dd into the group, and dd's write rate drops
to the limit. The v2 path (io.max) is the cgroup_limits code the role reuses, tested on a laid-out tree
(tests/integration/test_role_cgroup_limits.py).
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from ansible_collections.continuum.hydra.plugins.plugin_utils import _zipapp
from ansible_collections.continuum.hydra.tests.support import pidns as pidns_support
from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.role_run import VENV_BIN, run_role

pytestmark = pytest.mark.integration

V1_ROOT = "/sys/fs/cgroup"
SLO = 100
LIMIT = 1048576  # tenant_io_limit_max_bps in these tests: 1 MiB/s
GONE = 4190000  # no such PID in the test's namespace: a stale metric file


def write_metric(directory, pid, text):
    path = os.path.join(directory, "%d.metric" % pid)
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)


@pytest.fixture
def pidns():
    namespace = pidns_support.session()
    yield namespace
    namespace.close()


@pytest.fixture
def scene(tmp_path, pidns):
    """In the namespace: a tenant (real sleep) over its SLO; a stale and two garbage metric files; dd bullies on demand."""
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    tenant = pidns.spawn(["sleep", "600"])
    write_metric(str(metrics), tenant, "p99_latency_ms: 250\n")
    write_metric(str(metrics), GONE, "12\n")
    (metrics / "4194000.metric").write_text("p99 is fine today\n")
    (metrics / "4194001.metric").write_bytes(b"\x00\xff" * 10)
    outputs = []

    def bully():
        """A real dd writing with O_DIRECT; at most 1 GiB, its file removed at the end."""
        target = str(tmp_path / ("bully-%d.out" % len(outputs)))
        outputs.append(target)
        pid = pidns.spawn(["dd", "if=/dev/zero", "of=" + target, "bs=8k", "count=131072", "oflag=direct"])
        time.sleep(0.3)
        assert pidns.alive(pid), "dd with oflag=direct could not start on %s" % target
        return pid
    yield {"ns": pidns, "metrics": str(metrics), "tenant": tenant, "bully": bully}
    for target in outputs:
        if os.path.exists(target):
            os.unlink(target)


def ansible_env(tmp_path):
    return dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), HYDRA_REPORT_DIR=str(tmp_path / "reports"),
                PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))


def doctor(tmp_path, ns, expect, state_dir, check=False):
    """A real ansible-playbook run (in the namespace) of the doctor module with only tenant.slo; its check record."""
    out = str(tmp_path / "doctor.json")
    play = [{"name": "doctor", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Run doctor", "continuum.hydra.doctor": {"only": ["tenant.slo"], "expect": expect, "state_dir": state_dir},
         "register": "hydra_doctor"},
        {"name": "Save", "ansible.builtin.copy": {"content": "{{ hydra_doctor | to_json }}", "dest": out},
         "check_mode": False}]}]
    with open(str(tmp_path / "doctor.yml"), "w") as handle:
        yaml.safe_dump(play, handle)
    with open(str(tmp_path / "inventory.yml"), "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                        "ansible_python_interpreter": sys.executable}}}}, handle)
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "doctor.yml")]
    proc = ns.run(argv + (["--check"] if check else []), env=ansible_env(tmp_path), timeout=240, cwd=REPO)
    assert proc["rc"] == 0, (proc["stdout"] + proc["stderr"])[-4000:]
    with open(out) as handle:
        return json.load(handle)["checks"][0]


def test_doctor_warn_then_fail_naming_tenant_and_dd_then_cooldown_then_normal(tmp_path, scene):
    ns, metrics, tenant = scene["ns"], scene["metrics"], scene["tenant"]
    state_dir = str(tmp_path / "state")
    expect = {"tenant_metrics_dir": metrics, "tenant_slo_p99_ms": SLO, "tenant_persistence_runs": 2,
              "tenant_cooldown_runs": 1, "tenant_io_sample_s": 1.0, "tenant_io_limit_max_bps": LIMIT}

    # --check: judged, but no state written (the next real run is still the first).
    checked = doctor(tmp_path, ns, expect, state_dir, check=True)
    assert checked["status"] == "WARN" and not os.path.exists(os.path.join(state_dir, "tenants.json"))

    earlier = scene["bully"]()
    first = doctor(tmp_path, ns, expect, state_dir)
    assert first["status"] == "WARN", first["message"]
    assert "tenant PID %d (sleep) over its p99 SLO: 250 ms > 100 ms (1 of 2 runs" % tenant in first["message"]
    assert [s["pid"] for s in first["details"]["stale"]] == [GONE]  # listed, not judged, no crash
    assert sorted(os.path.basename(g["file"]) for g in first["details"]["garbage"]) == ["4194000.metric", "4194001.metric"]

    ns.kill(earlier)
    dd = scene["bully"]()  # a fresh dd, so it is still writing through the whole run
    second = doctor(tmp_path, ns, expect, state_dir)
    assert second["status"] == "FAIL", second["message"]
    assert "tenant PID %d (sleep, cgroup /" % tenant in second["message"] and "VIOLATED its p99 SLO" in second["message"]
    assert "likely bully PID %d (dd, cgroup /" % dd in second["message"], second["message"]
    view = second["details"]["tenants"][0]
    assert view["state"] == "VIOLATED" and view["pid"] == tenant
    top = view["bullies"][0]
    assert top["pid"] == dd and top["write_bps"] > 0 and "oflag=direct" in top["cmdline"]
    assert tenant not in [b["pid"] for b in view["bullies"]]
    assert view["mitigation"]["tier"] == 1 and view["mitigation"]["cgroup_limits"][0]["pids"] == [dd]
    assert view["mitigation"]["cgroup_limits"][0]["io_max"][0]["wbps"] == LIMIT  # capped: dd writes far more
    with open(os.path.join(state_dir, "tenants.json")) as handle:
        document = json.load(handle)
    assert document["runs"] == 2 and [r["state"] for r in document["tenants"].values()] == ["VIOLATED"]

    # Back under the SLO (the garbage files, which keep the check at WARN, removed): COOLDOWN, then NORMAL.
    write_metric(metrics, tenant, "p99_latency_ms: 40\n")
    for name in ("4194000.metric", "4194001.metric"):
        os.unlink(os.path.join(metrics, name))
    cooling = doctor(tmp_path, ns, expect, state_dir)
    assert cooling["status"] == "PASS" and cooling["details"]["tenants"][0]["state"] == "COOLDOWN", cooling["message"]
    normal = doctor(tmp_path, ns, expect, state_dir)
    assert normal["status"] == "PASS" and normal["details"]["tenants"][0]["state"] == "NORMAL", normal["message"]


# ---- the tenant_guard role -----------------------------------------------------------------------------------

def _v1_blkio():
    return os.access(os.path.join(V1_ROOT, "blkio", "cgroup.procs"), os.W_OK) and \
        not os.path.exists(os.path.join(V1_ROOT, "cgroup.controllers"))


def disk_of(path):
    """MAJ:MIN of the whole disk holding path (st_dev names a partition where there is one)."""
    dev = os.stat(path).st_dev
    number = "%d:%d" % (os.major(dev), os.minor(dev))
    sys_dev = "/sys/dev/block/%s" % number
    if os.path.exists(os.path.join(sys_dev, "partition")):
        with open(os.path.join(os.path.realpath(sys_dev), "..", "dev")) as handle:
            return handle.read().strip()
    return number


@pytest.fixture
def parent():
    """The cgroup parent of the guard's groups; removed at the end (after the namespace, and its dd, are gone)."""
    name = "hydra-test-tenant-%d" % os.getpid()
    yield name
    base = os.path.join(V1_ROOT, "blkio", name)
    if not os.path.isdir(base):
        return
    for entry in os.listdir(base):
        child = os.path.join(base, entry)
        if os.path.isdir(child):
            for _attempt in range(50):
                try:
                    os.rmdir(child)
                    break
                except OSError:  # its processes are still exiting
                    time.sleep(0.1)
    os.rmdir(base)


def role_vars(tmp_path, metrics, parent_name, mode):
    root = tmp_path / "node"
    return {"tenant_guard_mode": mode, "tenant_guard_python": "/usr/bin/python3",
            "tenant_guard_lib_dir": str(root / "lib"), "tenant_guard_bin_dir": str(root / "sbin"),
            "tenant_guard_config_path": str(root / "etc" / "tenant-guard.json"), "tenant_guard_unit_dir": str(root / "units"),
            "tenant_guard_state_dir": str(root / "state"), "tenant_guard_manage_service": False,
            "tenant_guard_cgroup_parent": parent_name, "tenant_guard_interval": 30,
            "tenant_guard_expect": {"tenant_metrics_dir": metrics, "tenant_slo_p99_ms": SLO, "tenant_persistence_runs": 2,
                                    "tenant_io_sample_s": 0.5, "tenant_io_limit_max_bps": LIMIT,
                                    "tenant_io_limit_min_bps": 262144, "tenant_io_devices": [disk_of(str(tmp_path))]}}


def guard(ns, program):
    proc = ns.run([program], timeout=120)
    assert proc["rc"] == 0, proc["stdout"] + proc["stderr"]
    return json.loads(proc["stdout"])


def test_guard_role_check_mode_idempotence_recommend_then_enforce_throttles_dd(tmp_path, parent, scene):
    if not _v1_blkio():
        pytest.skip("needs a writable cgroup v1 blkio hierarchy (root on a v1 or hybrid host); v2 io.max is tested on a tree")
    ns, metrics, tenant = scene["ns"], scene["metrics"], scene["tenant"]
    recommend = role_vars(tmp_path, metrics, parent, "recommend")
    node = tmp_path / "node"

    check = run_role(tmp_path, "tenant_guard", recommend, "tenant_guard_result", check=True)
    assert check.rc == 0, check.output[-4000:]
    assert check.changed == 5 and not node.exists()  # directories, zipapp, config, wrapper, units: nothing written
    installed = run_role(tmp_path, "tenant_guard", recommend, "tenant_guard_result")
    assert installed.rc == 0, installed.output[-4000:]
    assert installed.changed == check.changed
    again = run_role(tmp_path, "tenant_guard", recommend, "tenant_guard_result")
    assert again.rc == 0 and again.changed == 0, again.output[-4000:]
    result = installed.result

    with open(result["timer"]) as handle:
        timer = handle.read()
    assert "OnUnitActiveSec=30s" in timer and "WantedBy=timers.target" in timer
    with open(result["service"]) as handle:
        service = handle.read()
    assert "Type=oneshot" in service and "ExecStart=%s" % result["program"] in service
    if shutil.which("systemd-analyze"):
        verify = subprocess.run(["systemd-analyze", "verify", result["service"], result["timer"]], capture_output=True,
                                text=True, check=False)
        assert verify.returncode == 0 and "hydra-tenant-guard" not in verify.stderr, verify.stderr

    # recommend: the tenant goes DEGRADED then VIOLATED, the action is written, nothing is changed.
    dd = scene["bully"]()
    dd_groups = ns.read("/proc/%d/cgroup" % dd)
    assert guard(ns, result["program"])["status"] == "WARN"
    said = guard(ns, result["program"])
    assert said["status"] == "FAIL" and said["mode"] == "recommend"
    action = said["actions"][0]
    assert action["tenant_pid"] == tenant and action["applied"] is False and action["tier"] == 1
    assert action["cgroup_limits"][0]["pids"] == [dd]
    assert not os.path.exists(os.path.join(V1_ROOT, "blkio", parent))
    assert ns.read("/proc/%d/cgroup" % dd) == dd_groups
    with open(result["guard_file"]) as handle:
        assert json.load(handle)["actions"][0]["cgroup_limits"] == action["cgroup_limits"]

    # enforce: tier 1 through the cgroup_limits code; dd's write rate drops to the limit. Nobody is killed.
    enforce = run_role(tmp_path, "tenant_guard", role_vars(tmp_path, metrics, parent, "enforce"), "tenant_guard_result")
    assert enforce.rc == 0 and enforce.changed == 1, enforce.output[-4000:]  # the config only
    ns.kill(dd)
    dd = scene["bully"]()  # a fresh dd: the first may have written its 1 GiB meanwhile
    before = ns.write_rate(dd)
    done = guard(ns, result["program"])
    after = ns.write_rate(dd)
    applied = done["actions"][0]
    assert applied["applied"] is True and applied["cgroup_version"] == "v1" and applied["changed"] is True, applied
    assert applied["cgroup_limits"][0]["pids"] == [dd]
    group = os.path.join(V1_ROOT, "blkio", parent, "tenant-bully-%d" % dd)
    with open(os.path.join(group, "blkio.throttle.write_bps_device")) as handle:
        assert "%s %d" % (disk_of(str(tmp_path)), LIMIT) in handle.read().splitlines()
    assert ":blkio:/%s/tenant-bully-%d\n" % (parent, dd) in ns.read("/proc/%d/cgroup" % dd)
    print("dd write rate before %.1f MB/s, after %.2f MB/s (limit %.2f MB/s)" % (before / 1e6, after / 1e6, LIMIT / 1e6))
    assert before > 3 * LIMIT, "dd wrote only %.0f B/s before the limit" % before
    assert after <= 1.3 * LIMIT and after < before / 3
    assert ns.alive(dd) and ns.alive(tenant)

    # The next tick: nothing left to change; tier 1 recorded in the state doctor reads.
    next_tick = guard(ns, result["program"])
    assert next_tick["actions"][0]["changes"] == [] and next_tick["actions"][0]["changed"] is False
    with open(result["state_file"]) as handle:
        record = list(json.load(handle)["tenants"].values())[0]
    assert record["state"] == "VIOLATED" and record["tier1"]["pid"] == dd and record["tier1"]["limit_bps"] == LIMIT


def build_guard(tmp_path):
    """The zipapp the role builds, built the same way (the collection's reproducible builder)."""
    pyz = str(tmp_path / "guard.pyz")
    _zipapp.build(os.path.join(REPO, "roles", "tenant_guard", "files", "hydra_tenant_guard_main.py"), pyz)
    return pyz


def lay_out_v2(root):
    """A cgroup2 root as its files read on a v2 host with the io controller."""
    for rel, text in (("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n"), ("cgroup.subtree_control", ""),
                      ("cgroup.procs", "1\n")):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


def test_guard_enforce_on_a_cgroup_v2_tree_writes_io_max_and_moves_the_bully(tmp_path, scene):
    ns, metrics = scene["ns"], scene["metrics"]
    root = lay_out_v2(tmp_path / "cgroup")
    config = tmp_path / "guard.json"
    config.write_text(json.dumps({
        "mode": "enforce", "state_dir": str(tmp_path / "state"), "cgroup_root": root, "cgroup_version": "auto",
        "cgroup_parent": "hydra.slice", "expect": {"tenant_metrics_dir": metrics, "tenant_slo_p99_ms": SLO,
                                                   "tenant_persistence_runs": 2, "tenant_io_sample_s": 0.5,
                                                   "tenant_io_limit_max_bps": LIMIT, "tenant_io_devices": ["259:0"]}}))
    argv = ["/usr/bin/python3", "-s", "-E", build_guard(tmp_path), "--config", str(config)]
    dd = scene["bully"]()
    first = ns.run(argv)
    assert first["rc"] == 0 and json.loads(first["stdout"])["actions"] == [], first["stderr"]  # DEGRADED: nothing yet
    done = ns.run(argv)
    assert done["rc"] == 0, done["stderr"]
    action = json.loads(done["stdout"])["actions"][0]
    assert action["applied"] is True and action["cgroup_version"] == "v2"
    group = os.path.join(root, "hydra.slice", "tenant-bully-%d" % dd)
    with open(os.path.join(group, "io.max")) as handle:
        assert handle.read() == "259:0 rbps=%d wbps=%d" % (LIMIT, LIMIT)
    with open(os.path.join(group, "cgroup.procs")) as handle:
        assert handle.read().split() == [str(dd)]
    for directory in (root, os.path.join(root, "hydra.slice")):
        with open(os.path.join(directory, "cgroup.subtree_control")) as handle:
            assert handle.read() == "+io"


def test_guard_with_a_bad_mode_is_one_line(tmp_path):
    config = tmp_path / "guard.json"
    config.write_text(json.dumps({"mode": "destroy"}))
    proc = subprocess.run(["/usr/bin/python3", "-s", "-E", build_guard(tmp_path), "--config", str(config)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "mode 'destroy' is not one of recommend, enforce" in proc.stderr
    assert "Traceback" not in proc.stderr
