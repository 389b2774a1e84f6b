"""System and network checks as pure functions of probe data, and end to end on this machine.

Probe data is what the probes return on trees recorded here (tests/fixtures/hosts/debian12-vm) or laid out
from published sysfs dumps (tests/fixtures/edac, tests/fixtures/infiniband), with faults planted by
editing the copy: a 64 MiB /dev/shm, a v2 tree with a low memory.max, an EDAC ue_count of 1, an IB port
DOWN, a disk 99 % full.
"""

import os
import shutil

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import host as host_probe
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system
from ansible_collections.continuum.hydra.tests.support.envelopes import ok
from ansible_collections.continuum.hydra.tests.support.host_tree import OPTIONS, copy_host_tree, edit, lay_out_dump, recorded_statvfs, v2_tree

GIB = 2 ** 30


def judge(check_id, expect=None, **probes):
    chk = [c for c in CATALOGUE if c.id == check_id][0]
    envelopes = dict((name, probes.get(name, {"status": "absent", "data": None, "reason": "not given"})) for name in chk.probes)
    return registry.evaluate(chk, envelopes, expect or {})


# ---------------------------------------------------------------- /dev/shm

def shm(tmp_path, **edits):
    st = recorded_statvfs("statvfs-dev-shm.json", **edits)
    return ok(system.probe_dev_shm(OPTIONS, path=str(tmp_path), statvfs=lambda path: st))


def test_dev_shm(tmp_path):
    record = judge("system.dev_shm", dev_shm=shm(tmp_path))
    assert record["status"] == "PASS" and record["message"] == "/dev/shm is 23.5 GiB (23.5 GiB free)"
    docker = judge("system.dev_shm", dev_shm=shm(tmp_path, f_blocks=16384, f_bfree=16384, f_bavail=16384))
    assert docker["status"] == "FAIL" and docker["message"].startswith("/dev/shm is 64 MiB, far below the 1.0 GiB")
    assert "--shm-size" in docker["remediation"]
    half = judge("system.dev_shm", dev_shm=shm(tmp_path, f_blocks=131072, f_bfree=131072, f_bavail=131072))
    assert half["status"] == "WARN" and half["message"] == "/dev/shm is 512 MiB, below 1.0 GiB"
    assert judge("system.dev_shm", {"dev_shm_min_gb": 0.5}, dev_shm=shm(tmp_path, f_blocks=131072, f_bavail=131072))["status"] == "PASS"
    full = judge("system.dev_shm", dev_shm=shm(tmp_path, f_bavail=100000, f_bfree=100000))
    assert full["status"] == "WARN" and full["message"].startswith("/dev/shm is 98 % used")
    missing = judge("system.dev_shm", dev_shm=ok(system.probe_dev_shm(OPTIONS, path=str(tmp_path / "shm"))))
    assert missing["status"] == "FAIL" and missing["message"] == "%s does not exist" % (tmp_path / "shm")


# ---------------------------------------------------------------- cgroups

def host(tmp_path):
    return ok(host_probe.probe_host(OPTIONS, root=str(tmp_path), environ={}))


def test_cgroups_recorded_hybrid_host_passes(tmp_path):
    copy_host_tree(tmp_path)
    record = judge("system.cgroups", cgroups=ok(system.probe_cgroups(OPTIONS, root=str(tmp_path))), host=host(tmp_path))
    assert record["status"] == "PASS"
    assert record["message"] == ("cgroup hybrid (blkio, cpu, cpuacct, cpuset, devices, freezer, hugetlb, memory, pids); "
                                 "limits: memory unlimited, CPU unlimited")


def test_cgroups_v2_low_memory_max_and_cpu_quota_warn(tmp_path):
    service = v2_tree(tmp_path)
    ram = host(tmp_path)["data"]["memory_total_bytes"]
    (service / "memory.max").write_text("%d\n" % (ram // 4))
    (service / "cpu.max").write_text("50000 100000\n")
    record = judge("system.cgroups", cgroups=ok(system.probe_cgroups(OPTIONS, root=str(tmp_path))), host=host(tmp_path))
    assert record["status"] == "WARN"
    assert "memory limit %.1f GiB is 25 %% of the host's" % (ram // 4 / GIB) in record["message"]
    assert "CPU limit 0.5 of the host's 2 CPUs" in record["message"] and str(service / "cpu.max") in record["message"]
    assert judge("system.cgroups", {"cgroup_limit_warn_fraction": 0}, cgroups=ok(system.probe_cgroups(OPTIONS, root=str(tmp_path))),
                 host=host(tmp_path))["status"] == "PASS"


def test_cgroups_v2_without_memory_controller_warns(tmp_path):
    service = v2_tree(tmp_path)
    edit(service / "cgroup.controllers", "cpu io memory pids", "cpu io pids")
    record = judge("system.cgroups", cgroups=ok(system.probe_cgroups(OPTIONS, root=str(tmp_path))), host=host(tmp_path))
    assert record["status"] == "WARN" and "no memory controller" in record["message"]


def test_cgroups_errors_and_absence_never_pass(tmp_path):
    service = v2_tree(tmp_path)
    (service / "cpu.max").write_text("half\n")
    table = dict(doctor.probe_catalogue.PROBES, cgroups=lambda o: system.probe_cgroups(o, root=str(tmp_path)))
    result = doctor.run(only=["system.cgroups"], probes=table)
    check = result["checks"][0]
    assert check["status"] == "ERROR" and "cpu.max: 'half' is not 'QUOTA PERIOD'" in check["message"]


# ---------------------------------------------------------------- EDAC

def test_memory_errors(tmp_path):
    lay_out_dump(tmp_path, "edac/ie31200-alder-lake-2025.txt")
    mc = tmp_path / "sys/devices/system/edac/mc"
    assert judge("system.memory_errors", edac=ok(system.probe_edac(OPTIONS, root=str(tmp_path))))["message"] == \
        "2 memory controller(s), no uncorrected errors, 0 corrected"
    (mc / "mc1/ce_count").write_text("250\n")
    record = judge("system.memory_errors", edac=ok(system.probe_edac(OPTIONS, root=str(tmp_path))))
    assert record["status"] == "WARN" and record["message"] == "corrected memory errors above 100: mc1 250"
    assert judge("system.memory_errors", {"edac_ce_warn": 1000},
                 edac=ok(system.probe_edac(OPTIONS, root=str(tmp_path))))["status"] == "PASS"
    (mc / "mc0/ue_count").write_text("1\n")
    record = judge("system.memory_errors", edac=ok(system.probe_edac(OPTIONS, root=str(tmp_path))))
    assert record["status"] == "FAIL" and record["message"] == "uncorrected memory errors: mc0 1"


def test_memory_errors_name_the_dimm(tmp_path):
    lay_out_dump(tmp_path, "edac/amd-f17h-2021.txt")
    mc0 = tmp_path / "sys/devices/system/edac/mc/mc0"
    (mc0 / "ue_count").write_text("2\n")
    edit(mc0 / "rank7/dimm_ue_count", "0", "2")
    record = judge("system.memory_errors", edac=ok(system.probe_edac(OPTIONS, root=str(tmp_path))))
    assert record["status"] == "FAIL" and record["message"] == "uncorrected memory errors: mc0 2 (mc#0csrow#3channel#1)"
    assert "replace the DIMM" in record["remediation"]


# ---------------------------------------------------------------- NUMA

def two_nodes(tmp_path):
    copy_host_tree(tmp_path)
    base = tmp_path / "sys/devices/system/node"
    shutil.copytree(str(base / "node0"), str(base / "node1"))
    (base / "node1/cpulist").write_text("2-3\n")
    edit(base / "node1/meminfo", "Node 0", "Node 1")
    return base


def test_numa(tmp_path):
    base = two_nodes(tmp_path)
    record = judge("system.numa", numa=ok(system.probe_numa(OPTIONS, root=str(tmp_path))))
    assert record["status"] == "PASS" and record["message"].startswith("2 NUMA node(s): node 0: 2 CPUs")
    assert judge("system.numa", {"numa_nodes": 4}, numa=ok(system.probe_numa(OPTIONS, root=str(tmp_path))))["message"] == \
        "2 node(s) with CPUs, expected 4"
    meminfo = (base / "node1/meminfo").read_text()
    kib = meminfo.split("MemTotal:")[1].split()[0]
    (base / "node1/meminfo").write_text(meminfo.replace(" %s kB" % kib, " %d kB" % (int(kib) // 3), 1))
    record = judge("system.numa", numa=ok(system.probe_numa(OPTIONS, root=str(tmp_path))))
    assert record["status"] == "WARN" and record["message"].startswith("node 1 has ")
    (base / "node1/meminfo").write_text(meminfo.replace(" %s kB" % kib, " 0 kB", 1))
    record = judge("system.numa", numa=ok(system.probe_numa(OPTIONS, root=str(tmp_path))))
    assert record["status"] == "WARN" and record["message"] == "node(s) 1 have CPUs but no memory"


def test_numa_memory_only_node_is_not_judged(tmp_path):
    base = two_nodes(tmp_path)
    (base / "node1/cpulist").write_text("\n")  # like the HBM of a Grace Hopper superchip
    record = judge("system.numa", numa=ok(system.probe_numa(OPTIONS, root=str(tmp_path))))
    assert record["status"] == "PASS" and "node 1: 0 CPUs" in record["message"]


# ---------------------------------------------------------------- disk space

def disks(**edits):
    st = recorded_statvfs("statvfs-root.json", **edits)
    return ok(system.probe_disk_space(OPTIONS, statvfs=lambda path: st))


def test_disk_space():
    record = judge("system.disk_space", disk_space=disks())
    assert record["status"] == "PASS" and record["message"] == "2 path(s) checked; fullest / with 77.5 GiB free (30.8 %)"
    full = judge("system.disk_space", disk_space=disks(f_bavail=660530))  # 99 % full
    assert full["status"] == "FAIL" and full["message"].startswith("/ has 2.5 GiB free (1.0 %)")
    assert "/tmp has 2.5 GiB free" in full["message"]
    low = judge("system.disk_space", disk_space=disks(f_bavail=5000000))
    assert low["status"] == "WARN" and low["message"].startswith("/ has 19.1 GiB free (7.6 %)")
    assert judge("system.disk_space", {"disk_min_free_gb": 100}, disk_space=disks())["status"] == "WARN"
    inodes = judge("system.disk_space", disk_space=disks(f_favail=100000))
    assert inodes["status"] == "FAIL" and "inodes free" in inodes["message"]


def test_disk_space_explicit_missing_path_warns(tmp_path):
    data = system.probe_disk_space(dict(OPTIONS, disk_paths=[str(tmp_path), "/no/such/scratch"]))
    record = judge("system.disk_space", {"disk_paths": [str(tmp_path), "/no/such/scratch"]}, disk_space=ok(data))
    assert record["status"] == "WARN" and record["message"] == "/no/such/scratch does not exist"


# ---------------------------------------------------------------- clock

def test_time_sync(tmp_path):
    from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
    unsynced = system.parse_chronyc_tracking(read_fixture("hosts", "debian12-vm", "cmd/chronyc-tracking-unsynced.txt"))
    record = judge("system.time_sync", time_sync=ok(dict(unsynced, source="chronyc", tried={})))
    assert record["status"] == "WARN"
    assert record["message"] == "clock is not NTP-synchronised (chronyc, leap status Not synchronised, offset +0.000000 s)"
    local = system.parse_chronyc_tracking(read_fixture("hosts", "debian12-vm", "cmd/chronyc-tracking-local-stratum10.txt"))
    assert judge("system.time_sync", time_sync=ok(dict(local, source="chronyc", tried={})))["status"] == "PASS"
    assert judge("system.time_sync", time_sync={"status": "absent", "data": None, "reason": "no source"})["status"] == "SKIP"


# ---------------------------------------------------------------- InfiniBand

def test_ib_ports(tmp_path):
    lay_out_dump(tmp_path, "infiniband/procfs-hfi1-mlx4.txt")

    def ports():
        return ok(system.probe_infiniband(OPTIONS, root=str(tmp_path)))
    assert judge("network.ib_ports", infiniband=ports())["message"] == "3 port(s) ACTIVE/LinkUp at 40 Gb/s, 100 Gb/s"
    record = judge("network.ib_ports", {"ib_rate_gbps": 100}, infiniband=ports())
    assert record["status"] == "WARN" and record["message"] == \
        "mlx4_0/1 runs at 40 Gb/s, expected 100; mlx4_0/2 runs at 40 Gb/s, expected 100"
    assert judge("network.ib_ports", {"ib_rate_gbps": 100, "ib_devices": ["hfi1_0"]}, infiniband=ports())["status"] == "PASS"
    port2 = tmp_path / "sys/class/infiniband/mlx4_0/ports/2"
    edit(port2 / "state", "4: ACTIVE", "1: DOWN")
    edit(port2 / "phys_state", "5: LinkUp", "2: Polling")
    # Unlisted, a down port may be an uncabled spare: WARN; a rail the inventory lists is a FAIL.
    record = judge("network.ib_ports", infiniband=ports())
    assert record["status"] == "WARN" and record["message"] == "mlx4_0/2 is DOWN/Polling"
    record = judge("network.ib_ports", {"ib_devices": ["mlx4_0"]}, infiniband=ports())
    assert record["status"] == "FAIL" and record["message"] == "1 of 2 port(s) down: mlx4_0/2 is DOWN/Polling"
    record = judge("network.ib_ports", {"ib_devices": ["hfi1_0", "mlx5_0"]}, infiniband=ports())
    assert record["status"] == "WARN" and record["message"] == "mlx5_0 does not exist"
    # Ethernet (RoCE) ports share /sys/class/infiniband: they are not judged as InfiniBand rails.
    for device, port in (("hfi1_0", 1), ("mlx4_0", 1), ("mlx4_0", 2)):
        edit(tmp_path / ("sys/class/infiniband/%s/ports/%d/link_layer" % (device, port)), "InfiniBand", "Ethernet")
    assert judge("network.ib_ports", infiniband=ports())["status"] == "SKIP"


# ---------------------------------------------------------------- end to end on this machine

SYSTEM_CHECKS = ["system", "network"]


def test_doctor_runs_every_system_probe_on_this_machine():
    result = doctor.run(only=SYSTEM_CHECKS, level="deep")
    by_id = dict((c["id"], c) for c in result["checks"])
    assert set(by_id) == {c.id for c in CATALOGUE if c.category in ("system", "network")}
    for name in ("dev_shm", "cgroups", "numa", "disk_space", "time_sync"):
        assert result["probes"][name]["status"] == "ok", result["probes"][name]
    with open("/proc/mounts") as handle:
        types = set(line.split()[2] for line in handle)
    version = {(True, True): "hybrid", (False, True): "v2", (True, False): "v1"}[("cgroup" in types, "cgroup2" in types)]
    assert by_id["system.cgroups"]["details"]["version"] == version
    assert by_id["system.cgroups"]["message"].startswith("cgroup %s (" % version)
    st = os.statvfs("/dev/shm")
    assert by_id["system.dev_shm"]["details"]["size_bytes"] == st.f_blocks * st.f_frsize
    assert sum(n["cpu_count"] for n in by_id["system.numa"]["details"]["nodes"]) == os.cpu_count()
    assert [p["path"] for p in by_id["system.disk_space"]["details"]["paths"]] == ["/", "/tmp"]
    kernel = system.parse_kernel_clock(system.kernel_clock_state())
    if by_id["system.time_sync"]["details"]["source"] == "kernel":
        assert by_id["system.time_sync"]["status"] == ("PASS" if kernel["synchronized"] else "WARN")
    if not os.path.isdir("/sys/devices/system/edac/mc"):
        assert by_id["system.memory_errors"]["status"] == "SKIP"
    if not os.path.isdir("/sys/class/infiniband"):
        assert by_id["network.ib_ports"]["status"] == "SKIP" and "no InfiniBand" in by_id["network.ib_ports"]["message"]


def test_bad_expectations_are_rejected_up_front():
    with pytest.raises(doctor.DoctorInputError, match=r"expect.dev_shm_min_gb: 'big' is not a number"):
        doctor.run(only=["system.dev_shm"], expect={"dev_shm_min_gb": "big"})
    with pytest.raises(doctor.DoctorInputError, match=r"expect.disk_paths: '/' is not a list"):
        doctor.run(only=["system.disk_space"], expect={"disk_paths": "/"})
    result = doctor.run(only=["system.disk_space"], expect={"disk_paths": ["relative/path"]})
    assert result["checks"][0]["status"] == "ERROR"
    assert "expect.disk_paths: 'relative/path' is not an absolute path" in result["checks"][0]["message"]


def test_a_missing_disk_path_the_inventory_names_warns_even_alone(tmp_path):
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
    missing = str(tmp_path / "scratch")
    record = doctor.run(only=["system.disk_space"], expect={"disk_paths": [missing]})["checks"][0]
    assert record["status"] == "WARN" and record["message"] == "%s does not exist" % missing


def test_a_hung_statvfs_is_an_error_not_a_hang():
    import threading

    from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system as system_probes
    from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
    release = threading.Event()
    try:
        options = {"disk_paths": ["/"], "timeouts": {"command": 0.2}}
        with pytest.raises(ProbeError) as err:
            system_probes.probe_disk_space(options, statvfs=lambda path: release.wait(30))
        assert str(err.value) == "statvfs(/) timed out after 0.2s"
    finally:
        release.set()
