"""cgroup limit planning, v2 and v1, over a read() callable (a dict stands for the files)."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import cgroups as cg


def entry(**values):
    return cg.normalize_entry(values)


def reader(files):
    return files.get


def test_sizes():
    assert cg.parse_size("512M", "x") == 512 * 1024 ** 2
    assert cg.parse_size("1.5G", "x") == int(1.5 * 1024 ** 3)
    assert cg.parse_size("2GiB", "x") == 2 * 1024 ** 3
    assert cg.parse_size("4096", "x") == 4096
    assert cg.parse_size("max", "x") == "max"
    for bad in ("lots", "-1", "0", True):
        with pytest.raises(cg.CgroupError, match="x: .* is not a"):
            cg.parse_size(bad, "x")


def test_v2_plan_writes_only_what_differs():
    files = {"hydra.slice/a/memory.max": "536870912\n", "hydra.slice/a/cpu.max": "max 100000\n",
             "hydra.slice/a/io.max": "8:0 rbps=1048576 wbps=max riops=max wiops=max\n"}
    writes = cg.plan_limits(entry(name="a", memory_max="512M", cpu_percent=50,
                                  io_max=[{"device": "8:0", "rbps": 1048576}, {"device": "8:16", "wiops": 10}]),
                            cg.V2, "hydra.slice", reader(files))
    assert [(w["path"], w["write"]) for w in writes] == [
        ("hydra.slice/a/cpu.max", "50000 100000"), ("hydra.slice/a/io.max", "8:16 wiops=10")]


def test_v1_plan_compares_page_aligned_and_unlimited():
    files = {"memory/hydra.slice/a/memory.limit_in_bytes": "999424\n",  # 1000000 as the kernel stores it
             "cpu/hydra.slice/a/cpu.cfs_quota_us": "-1\n", "cpu/hydra.slice/a/cpu.cfs_period_us": "100000\n",
             "blkio/hydra.slice/a/blkio.throttle.read_bps_device": "254:0 1048576\n"}
    io_max = [{"device": "254:0", "rbps": 1048576, "wbps": 5}]
    writes = cg.plan_limits(entry(name="a", memory_max=1000000, cpu_percent="max", io_max=io_max), cg.V1, "hydra.slice",
                            reader(files))
    assert [(w["path"], w["write"]) for w in writes] == [
        ("blkio/hydra.slice/a/blkio.throttle.write_bps_device", "254:0 5")]


def test_v2_controllers_enabled_from_root_once_per_directory():
    files = {"cgroup.controllers": "cpu io memory pids", "cgroup.subtree_control": "cpu"}
    writes = cg.v2_subtree_writes([entry(name="a", cpu_percent=10), entry(name="b", memory_max="1G")], "hydra.slice",
                                  reader(files))
    assert [(w["path"], w["write"]) for w in writes] == [("cgroup.subtree_control", "+cpu +memory"),
                                                         ("hydra.slice/cgroup.subtree_control", "+cpu +memory")]
    with pytest.raises(cg.CgroupError, match=r"controller io is not available in / \(cgroup.controllers: cpu memory pids\)"):
        cg.v2_subtree_writes([entry(name="a", io_max=[{"device": "8:0", "rbps": 1}])], "x",
                             reader({"cgroup.controllers": "cpu memory pids"}))


def test_matching_pids_by_name_user_and_pid_alive_only():
    procs = [{"pid": 10, "comm": "fio", "uid": 0, "user": "root"}, {"pid": 11, "comm": "bash", "uid": 1000, "user": "alice"},
             {"pid": 12, "comm": "sshd", "uid": 0, "user": "root"}]
    assert cg.matching_pids(entry(name="a", processes=["fio"], users=["alice"], pids=[12, 99]), procs) == [10, 11, 12]
    assert cg.matching_pids(entry(name="a", users=["1000"]), procs) == [11]


def test_limits_from_findings_scale_by_severity():
    entries = cg.limits_from_findings([{"pid": 5, "severity": "fail"}, {"pid": 6, "severity": "warn"}, {"pid": 7, "severity": "fail"}],
                                      {"warn": {"cpu_percent": 100}, "fail": {"cpu_percent": 25, "memory_max": "2G"}})
    assert entries == [{"cpu_percent": 100, "name": "noisy-warn", "pids": [6]},
                       {"cpu_percent": 25, "memory_max": "2G", "name": "noisy-fail", "pids": [5, 7]}]
    with pytest.raises(cg.CgroupError, match="severity_limits: no limits for severity 'fail'"):
        cg.limits_from_findings([{"pid": 5, "severity": "fail"}], {"warn": {"cpu_percent": 1}})
    with pytest.raises(cg.CgroupError, match="findings: severity 'urgent' is not one of warn, fail"):
        cg.limits_from_findings([{"pid": 5, "severity": "urgent"}], {})


@pytest.mark.parametrize("values, message", [
    ({"name": "a"}, "limits[0]: sets no limit"),
    ({"name": "a/b", "cpu_percent": 5}, "limits[0].name: 'a/b' may hold only"),
    ({"cgroup": "../etc", "cpu_percent": 5}, "limits[0].cgroup: '../etc' must be a path relative"),
    ({"name": "a", "cpu_percent": "fast"}, "limits[0].cpu_percent: 'fast' is not a positive percentage"),
    ({"name": "a", "io_max": [{"device": "/nonexistent", "rbps": 1}]}, "io_max.device: '/nonexistent' is neither"),
    ({"name": "a", "swap": 1}, "limits[0]: unknown key 'swap'"),
])
def test_bad_entries(values, message):
    with pytest.raises(cg.CgroupError) as err:
        cg.normalize_entry(values)
    assert str(err.value).startswith(message)


def test_detect_version(tmp_path):
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "v1" / "memory").mkdir(parents=True)
    assert cg.detect_version(str(tmp_path / "v2")) == "v2"
    assert cg.detect_version(str(tmp_path / "v1")) == "v1"
    with pytest.raises(cg.CgroupError, match="is neither cgroup v2"):
        cg.detect_version(str(tmp_path))
