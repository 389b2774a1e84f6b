"""System probes (/dev/shm, cgroups, EDAC, NUMA, disks, clock, InfiniBand) on recorded trees and on this machine.

Trees come from tests/fixtures/hosts/debian12-vm (recorded here) and from the published sysfs dumps in
tests/fixtures/edac and tests/fixtures/infiniband; faults are planted by editing the copy.
"""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system
from ansible_collections.continuum.hydra.plugins.module_utils._host import procfs
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.tests.support.helpers import REPO, fixture_path, read_fixture
from ansible_collections.continuum.hydra.tests.support.host_tree import HOST, OPTIONS, copy_host_tree, edit, lay_out_dump, recorded_statvfs, v2_tree

GIB = 2 ** 30


# ---------------------------------------------------------------- /dev/shm

def test_dev_shm_on_this_machine_matches_statvfs():
    data = system.probe_dev_shm(OPTIONS)
    st = os.statvfs("/dev/shm")
    assert data["exists"] and data["size_bytes"] == st.f_blocks * st.f_frsize


def test_a_hung_statvfs_of_dev_shm_and_of_a_disk_path_is_an_error_not_a_hang(tmp_path):
    import threading
    release = threading.Event()

    def hung(path):
        release.wait(60)  # a hung NFS or Lustre mount: statvfs never returns
        raise OSError("released")

    options = {"timeouts": {"command": 0.2}, "disk_paths": [str(tmp_path)]}
    try:
        with pytest.raises(ProbeError, match=r"statvfs\(%s\) timed out after 0.2s" % tmp_path):
            system.probe_dev_shm(options, path=str(tmp_path), statvfs=hung)
        with pytest.raises(ProbeError, match=r"statvfs\(%s\) timed out after 0.2s" % tmp_path):
            system.probe_disk_space(options, statvfs=hung)
    finally:
        release.set()


def test_dev_shm_64_mib_and_missing(tmp_path):
    docker_default = recorded_statvfs("statvfs-dev-shm.json", f_blocks=16384, f_bfree=16384, f_bavail=16384)
    data = system.probe_dev_shm(OPTIONS, path=str(tmp_path), statvfs=lambda p: docker_default)
    assert data["size_bytes"] == 64 * 2 ** 20
    assert system.probe_dev_shm(OPTIONS, path=str(tmp_path / "nope")) == {"path": str(tmp_path / "nope"), "exists": False}

    def denied(path):
        raise PermissionError(13, "Permission denied")
    with pytest.raises(ProbeError, match="statvfs.*Permission denied"):
        system.probe_dev_shm(OPTIONS, path=str(tmp_path), statvfs=denied)


# ---------------------------------------------------------------- cgroups

def test_mount_tables_of_this_machine_parse_to_the_same_cgroup_mounts():
    info = procfs.parse_mountinfo(read_fixture("hosts", HOST, "proc/self/mountinfo"))
    mounts = procfs.parse_proc_mounts(read_fixture("hosts", HOST, "proc/mounts"))
    cgroups = [(m["mount_point"], m["fstype"]) for m in info if m["fstype"].startswith("cgroup")]
    assert cgroups == [(m["mount_point"], m["fstype"]) for m in mounts if m["fstype"].startswith("cgroup")]
    assert ("/sys/fs/cgroup/unified", "cgroup2") in cgroups and ("/sys/fs/cgroup/memory", "cgroup") in cgroups
    assert system.parse_proc_cgroup(read_fixture("hosts", HOST, "proc/self/cgroup"))["v1"]["memory"].startswith("/process_api/")
    with pytest.raises(ProbeError, match="mountinfo line 1"):
        procfs.parse_mountinfo("garbage\n")
    with pytest.raises(ProbeError, match="/proc/self/cgroup line 2"):
        system.parse_proc_cgroup("0::/\nnot a cgroup line\n")


def test_recorded_hybrid_tree(tmp_path):
    copy_host_tree(tmp_path)
    data = system.probe_cgroups(OPTIONS, root=str(tmp_path))
    assert data["version"] == "hybrid"
    assert {"memory", "cpu", "cpuset", "pids"} <= set(data["v1_controllers"]) and data["v2_controllers"] == ["hugetlb"]
    assert data["memory_limit_bytes"] is None and data["cpu_limit"] is None  # the recorded LONG_MAX and -1
    # a v1 limit planted on the recorded path of the process, and a stricter one on its parent
    job = tmp_path / "sys/fs/cgroup/memory" / data["process_cgroup"].lstrip("/")
    (job / "memory.limit_in_bytes").write_text("8589934592\n")
    (job.parent / "memory.limit_in_bytes").write_text("4294967296\n")
    (tmp_path / "sys/fs/cgroup/cpu/cpu.cfs_quota_us").write_text("150000\n")
    data = system.probe_cgroups(OPTIONS, root=str(tmp_path))
    assert data["memory_limit_bytes"] == 4 * GIB and data["memory_limit_file"] == str(job.parent / "memory.limit_in_bytes")
    assert data["cpu_limit"] == 1.5


def test_v2_tree_limits_walk_up_the_hierarchy(tmp_path):
    service = v2_tree(tmp_path)
    data = system.probe_cgroups(OPTIONS, root=str(tmp_path))
    assert data["version"] == "v2" and data["v1_controllers"] == []
    assert data["controllers"] == ["cpu", "io", "memory", "pids"]
    assert data["memory_limit_bytes"] is None and data["cpu_limit"] is None
    (service / "memory.max").write_text("max\n")
    (service.parent / "memory.max").write_text("2147483648\n")
    (service / "cpu.max").write_text("200000 100000\n")
    (service.parent / "cpu.max").write_text("max 100000\n")
    data = system.probe_cgroups(OPTIONS, root=str(tmp_path))
    assert data["memory_limit_bytes"] == 2 * GIB and data["memory_limit_file"].endswith("system.slice/memory.max")
    assert data["cpu_limit"] == 2.0 and data["cpu_limit_file"].endswith("train.service/cpu.max")
    (service / "memory.max").write_text("lots\n")
    with pytest.raises(ProbeError, match=r"train.service/memory.max: 'lots' is neither 'max' nor a number"):
        system.probe_cgroups(OPTIONS, root=str(tmp_path))


def test_v2_inside_a_cgroup_namespace_reads_the_mount_itself(tmp_path):
    v2_tree(tmp_path)
    (tmp_path / "proc/self/cgroup").write_text("0::/\n")  # what a container with its own cgroup namespace sees
    (tmp_path / "sys/fs/cgroup/memory.max").write_text("1073741824\n")
    assert system.probe_cgroups(OPTIONS, root=str(tmp_path))["memory_limit_bytes"] == GIB


def test_no_cgroup_mounted_is_absent_and_falls_back_to_proc_mounts(tmp_path):
    copy_host_tree(tmp_path)
    (tmp_path / "proc/self/mountinfo").unlink()
    assert system.probe_cgroups(OPTIONS, root=str(tmp_path))["version"] == "hybrid"  # from /proc/mounts
    edit(tmp_path / "proc/mounts", "cgroup", "tmpfs")
    with pytest.raises(ProbeAbsent, match="no cgroup filesystem"):
        system.probe_cgroups(OPTIONS, root=str(tmp_path))


def test_cgroup_version_of_this_machine_matches_proc_mounts():
    with open("/proc/mounts") as handle:
        types = set(line.split()[2] for line in handle)
    expected = {(True, True): "hybrid", (False, True): "v2", (True, False): "v1"}[("cgroup" in types, "cgroup2" in types)]
    assert system.probe_cgroups(OPTIONS)["version"] == expected


V1_ROOT = "/sys/fs/cgroup"


@pytest.mark.skipif(not (os.geteuid() == 0 and os.access(V1_ROOT + "/memory", os.W_OK) and os.path.isdir(V1_ROOT + "/cpu")),
                    reason="needs root and writable cgroup v1 memory and cpu hierarchies")
def test_real_v1_limits_of_a_process_moved_into_a_limited_cgroup():
    name = "hydra-test-%d" % os.getpid()
    memory_parent, cpu_dir = os.path.join(V1_ROOT, "memory", name), os.path.join(V1_ROOT, "cpu", name)
    memory_job = os.path.join(memory_parent, "job")
    os.makedirs(memory_job)
    os.mkdir(cpu_dir)
    try:
        with open(os.path.join(memory_parent, "memory.limit_in_bytes"), "w") as handle:
            handle.write("268435456")
        with open(os.path.join(cpu_dir, "cpu.cfs_quota_us"), "w") as handle:
            handle.write("50000")
        script = (
            "import json, os, sys\n"
            "for d in sys.argv[1:]:\n"
            "    open(os.path.join(d, 'cgroup.procs'), 'w').write(str(os.getpid()))\n"
            "from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system\n"
            "print(json.dumps(system.probe_cgroups({})))\n")
        out = subprocess.run([sys.executable, "-c", script, memory_job, cpu_dir], check=True, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "collections")), timeout=60).stdout
    finally:
        for directory in (memory_job, memory_parent, cpu_dir):
            os.rmdir(directory)
    data = json.loads(out)
    assert data["process_cgroup"] == "/%s/job" % name
    assert data["memory_limit_bytes"] == 256 * 2 ** 20  # enforced by the parent, found by walking up
    assert data["memory_limit_file"] == os.path.join(memory_parent, "memory.limit_in_bytes")
    assert data["cpu_limit"] == 0.5


# ---------------------------------------------------------------- EDAC

def test_edac_two_clean_controllers_and_a_planted_uncorrected_error(tmp_path):
    lay_out_dump(tmp_path, "edac/ie31200-alder-lake-2025.txt")
    data = system.probe_edac(OPTIONS, root=str(tmp_path))
    assert [(c["name"], c["ce_count"], c["ue_count"]) for c in data["controllers"]] == [("mc0", 0, 0), ("mc1", 0, 0)]
    (tmp_path / "sys/devices/system/edac/mc/mc1/ue_count").write_text("1\n")
    assert system.probe_edac(OPTIONS, root=str(tmp_path))["controllers"][1]["ue_count"] == 1
    (tmp_path / "sys/devices/system/edac/mc/mc0/ce_count").write_text("many\n")
    with pytest.raises(ProbeError, match=r"mc0/ce_count: 'many' is not an integer"):
        system.probe_edac(OPTIONS, root=str(tmp_path))


def test_edac_truncated_dump_is_an_error_and_dimm_labels_come_through(tmp_path):
    lay_out_dump(tmp_path, "edac/amd-f17h-2021.txt")
    with pytest.raises(ProbeError, match="mc0/ue_count does not exist"):
        system.probe_edac(OPTIONS, root=str(tmp_path))
    mc0 = tmp_path / "sys/devices/system/edac/mc/mc0"
    (mc0 / "ue_count").write_text("1\n")
    edit(mc0 / "rank5/dimm_ue_count", "0", "1")
    controller = system.probe_edac(OPTIONS, root=str(tmp_path))["controllers"][0]
    assert controller["mc_name"] == "F17h" and controller["dimm_count"] == 2
    assert [(d["name"], d["label"], d["ue_count"]) for d in controller["dimms_with_errors"]] == [("rank5", "mc#0csrow#2channel#1", 1)]


def test_edac_absent_here_and_when_no_controller(tmp_path):
    if not os.path.isdir("/sys/devices/system/edac/mc"):
        with pytest.raises(ProbeAbsent, match="no EDAC memory controller"):
            system.probe_edac(OPTIONS)
    (tmp_path / "sys/devices/system/edac/mc/power").mkdir(parents=True)
    with pytest.raises(ProbeAbsent, match="registers no memory controller"):
        system.probe_edac(OPTIONS, root=str(tmp_path))


# ---------------------------------------------------------------- NUMA

def test_numa_recorded_node_and_a_planted_second_node(tmp_path):
    copy_host_tree(tmp_path)
    nodes = system.probe_numa(OPTIONS, root=str(tmp_path))["nodes"]
    recorded_kib = int(read_fixture("hosts", HOST, "sys/devices/system/node/node0/meminfo").split()[3])
    assert nodes == [{"node": 0, "cpu_count": 2, "cpulist": "0-1", "memory_total_bytes": recorded_kib * 1024, "distances": [10]}]
    base = tmp_path / "sys/devices/system/node"
    shutil.copytree(str(base / "node0"), str(base / "node1"))
    (base / "node1/cpulist").write_text("2-3,6\n")
    edit(base / "node1/meminfo", "Node 0", "Node 1")
    nodes = system.probe_numa(OPTIONS, root=str(tmp_path))["nodes"]
    assert [(n["node"], n["cpu_count"]) for n in nodes] == [(0, 2), (1, 3)]
    (base / "node1/cpulist").write_text("two\n")
    with pytest.raises(ProbeError, match=r"node1/cpulist: cpulist 'two' is not a list of CPU ranges"):
        system.probe_numa(OPTIONS, root=str(tmp_path))
    (base / "node1/cpulist").unlink()
    with pytest.raises(ProbeError, match="node1/cpulist does not exist"):
        system.probe_numa(OPTIONS, root=str(tmp_path))


def test_numa_of_this_machine_covers_every_online_cpu():
    nodes = system.probe_numa(OPTIONS)["nodes"]
    online = procfs.parse_cpulist(open("/sys/devices/system/cpu/online").read())
    assert sum(n["cpu_count"] for n in nodes) == len(online)
    assert len(nodes) == len([d for d in os.listdir("/sys/devices/system/node") if d.startswith("node") and d[4:].isdigit()])


def test_cpulist_forms():
    assert procfs.parse_cpulist("0-3,8-9,12\n") == [0, 1, 2, 3, 8, 9, 12]
    assert procfs.parse_cpulist("\n") == []  # a memory-only node


# ---------------------------------------------------------------- disk space

def test_disk_space_of_this_machine_and_explicit_paths(tmp_path):
    data = system.probe_disk_space(OPTIONS)
    assert [p["path"] for p in data["paths"]] == ["/", "/tmp"] and not data["paths_explicit"]
    st = os.statvfs("/")
    assert data["paths"][0]["size_bytes"] == st.f_blocks * st.f_frsize
    data = system.probe_disk_space(dict(OPTIONS, disk_paths=[str(tmp_path), "/no/such/scratch"]))
    assert [p["path"] for p in data["paths"]] == [str(tmp_path)] and data["missing"] == ["/no/such/scratch"]
    # a path the inventory names is never optional: its absence is data for the check to WARN on
    data = system.probe_disk_space(dict(OPTIONS, disk_paths=["/no/such/scratch"]))
    assert data["paths"] == [] and data["missing"] == ["/no/such/scratch"] and data["paths_explicit"]
    for bad in ("scratch", 5):
        with pytest.raises(ProbeError, match=r"expect.disk_paths: .* is not an absolute path"):
            system.probe_disk_space(dict(OPTIONS, disk_paths=[bad]))


def test_disk_space_from_a_99_percent_full_statvfs():
    full = recorded_statvfs("statvfs-root.json", f_bavail=660530, f_bfree=660530)  # 1 % of the recorded f_blocks
    data = system.probe_disk_space(OPTIONS, statvfs=lambda path: full)
    assert data["paths"][0]["free_bytes"] == 660530 * 4096


# ---------------------------------------------------------------- clock

def test_chronyc_tracking_recorded_here():
    unsynced = system.parse_chronyc_tracking(read_fixture("hosts", HOST, "cmd/chronyc-tracking-unsynced.txt"))
    assert unsynced["synchronized"] is False and unsynced["leap_status"] == "Not synchronised"
    local = system.parse_chronyc_tracking(read_fixture("hosts", HOST, "cmd/chronyc-tracking-local-stratum10.txt"))
    assert local["synchronized"] is True and local["stratum"] == 10 and local["offset_seconds"] == 0.0
    slow = read_fixture("hosts", HOST, "cmd/chronyc-tracking-local-stratum10.txt").replace(
        "0.000000000 seconds fast", "0.250000000 seconds slow")
    assert system.parse_chronyc_tracking(slow)["offset_seconds"] == -0.25
    assert system.parse_chronyc_tracking(read_fixture("hosts", HOST, "cmd/chronyc-tracking-no-daemon.txt")) is None


def test_kernel_clock_recorded_here_reads_unsynchronised():
    state = json.loads(read_fixture("hosts", HOST, "cmd/adjtimex.json"))
    assert system.parse_kernel_clock(state) == {"synchronized": False, "maxerror_us": 16000000, "esterror_us": 16000000,
                                                "sta_unsync": True}
    assert system.parse_kernel_clock(dict(state, maxerror_us=1500, status=0))["synchronized"] is True


def test_time_sync_of_this_machine_agrees_with_the_kernel():
    data = system.probe_time_sync(OPTIONS)
    kernel = system.parse_kernel_clock(system.kernel_clock_state())
    assert data["source"] in ("timedatectl", "chronyc", "kernel")
    if data["source"] == "kernel":
        assert data["synchronized"] == kernel["synchronized"]
        assert set(data["tried"]) == {"timedatectl", "chronyc"}


CAT, SLEEP = shutil.which("cat"), shutil.which("sleep")


def _tool(directory, name, body):
    """A stand-in for a tool this machine cannot run for real (no systemd, no chronyd), replaying recorded output."""
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_time_sync_order_timedatectl_then_chronyc_then_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    recorded_failure = read_fixture("hosts", HOST, "cmd/timedatectl-show-NTPSynchronized.txt").split("# rc=")[0]
    _tool(tmp_path, "timedatectl", "%s >&2 <<'EOF'\n%sEOF\nexit 1\n" % (CAT, recorded_failure))
    _tool(tmp_path, "chronyc", "%s '%s'\n" % (CAT, fixture_path("hosts", HOST, "cmd/chronyc-tracking-unsynced.txt")))
    data = system.probe_time_sync(OPTIONS, kernel_clock=lambda: pytest.fail("the kernel is the last resort"))
    assert data["source"] == "chronyc" and data["synchronized"] is False
    assert "System has not been booted with systemd" in data["tried"]["timedatectl"]
    _tool(tmp_path, "timedatectl", "echo yes\n")
    assert system.probe_time_sync(OPTIONS)["source"] == "timedatectl"
    assert system.probe_time_sync(OPTIONS)["synchronized"] is True


def test_time_sync_hanging_tools_fall_through_and_nothing_left_is_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    _tool(tmp_path, "timedatectl", "%s 30\n" % SLEEP)
    options = dict(OPTIONS, timeouts={"command": 1, "torch": 90})
    data = system.probe_time_sync(options, kernel_clock=lambda: {"maxerror_us": 2000, "esterror_us": 100, "status": 0, "state": 0})
    assert data["source"] == "kernel" and data["synchronized"] is True
    assert "timed out after 1s" in data["tried"]["timedatectl"] and data["tried"]["chronyc"] == "not installed"
    with pytest.raises(ProbeAbsent, match="no clock synchronisation source answered: chronyc: not installed; kernel: EPERM"):
        system.probe_time_sync(options, kernel_clock=lambda: {"error": "EPERM"})


# ---------------------------------------------------------------- InfiniBand

def test_infiniband_ports_and_planted_faults(tmp_path):
    lay_out_dump(tmp_path, "infiniband/procfs-hfi1-mlx4.txt")
    ports = system.probe_infiniband(OPTIONS, root=str(tmp_path))["ports"]
    assert [(p["device"], p["port"], p["state"], p["phys_state"], p["rate_gbps"]) for p in ports] == [
        ("hfi1_0", 1, "ACTIVE", "LinkUp", 100.0), ("mlx4_0", 1, "ACTIVE", "LinkUp", 40.0), ("mlx4_0", 2, "ACTIVE", "LinkUp", 40.0)]
    port2 = tmp_path / "sys/class/infiniband/mlx4_0/ports/2"
    edit(port2 / "state", "4: ACTIVE", "1: DOWN")
    edit(port2 / "phys_state", "5: LinkUp", "2: Polling")
    assert system.probe_infiniband(OPTIONS, root=str(tmp_path))["ports"][2]["phys_state"] == "Polling"
    (port2 / "rate").write_text("fast\n")
    with pytest.raises(ProbeError, match=r"mlx4_0/ports/2/rate: 'fast' is not 'N Gb/sec"):
        system.probe_infiniband(OPTIONS, root=str(tmp_path))
    (port2 / "state").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ProbeError, match="mlx4_0/ports/2/state: not a text file"):
        system.probe_infiniband(OPTIONS, root=str(tmp_path))
    (port2 / "state").unlink()
    with pytest.raises(ProbeError, match="mlx4_0/ports/2/state does not exist"):
        system.probe_infiniband(OPTIONS, root=str(tmp_path))


def test_infiniband_absent_on_this_machine():
    if os.path.isdir("/sys/class/infiniband"):
        pytest.skip("this machine has RDMA devices")
    with pytest.raises(ProbeAbsent, match="no InfiniBand/RDMA device"):
        system.probe_infiniband(OPTIONS)


# ---------------------------------------------------------------- one bad line (issue 23)

def test_one_malformed_mountinfo_or_cgroup_line_is_counted_not_fatal(tmp_path):
    copy_host_tree(tmp_path)
    good = system.probe_cgroups(OPTIONS, root=str(tmp_path))
    mountinfo = tmp_path / "proc/self/mountinfo"
    mountinfo.write_text("garbage without the separator\n" + mountinfo.read_text())
    cgroup = tmp_path / "proc/self/cgroup"
    cgroup.write_text(cgroup.read_text() + "not-a-cgroup-line\n")
    data = system.probe_cgroups(OPTIONS, root=str(tmp_path))
    assert dict(data, bad_lines=None) == dict(good, bad_lines=None)
    assert data["bad_lines"]["count"] == 2
    assert [(s["source"], s["line"]) for s in data["bad_lines"]["sample"]] == [
        ("mountinfo", 1), ("/proc/self/cgroup", len(cgroup.read_text().splitlines()))]
    # Without a count to report to, a parser still names the first bad line.
    with pytest.raises(ProbeError, match="mountinfo line 1 is not in the kernel's format: 'garbage without"):
        procfs.parse_mountinfo(mountinfo.read_text())


def test_a_chronyc_line_that_cannot_be_read_is_counted():
    text = read_fixture("hosts", HOST, "cmd/chronyc-tracking-local-stratum10.txt")
    broken = text.replace("0.000000000 seconds fast", "0.0.0 seconds fast").replace("Stratum         : 10", "Stratum         : " + "1" * 5000)
    parsed = system.parse_chronyc_tracking(broken)
    assert parsed["synchronized"] is True and parsed["offset_seconds"] is None and parsed["stratum"] is None
    assert parsed["bad_lines"]["count"] == 2
