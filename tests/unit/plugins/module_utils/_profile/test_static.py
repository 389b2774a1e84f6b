"""profile's static profile (a laid-out /proc and /sys tree, recorded nvidia-smi output), options and result shape."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import command as _command
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._profile import run as _run
from ansible_collections.continuum.hydra.plugins.module_utils._profile import static as _profile
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8 hypervisor

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
"""
MEMINFO = "MemTotal:       2113645568 kB\nMemAvailable:   2000000000 kB\nHugePages_Total:      16\nHugePages_Free:       12\nHugepagesize:       2048 kB\n"


def write(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)


@pytest.fixture
def host(tmp_path):
    """Two sockets x 2 cores x 2 threads, two NUMA nodes, an NVMe root and a rotational /data, a NIC and an IB port."""
    root = tmp_path
    write(root, "/proc/cpuinfo", CPUINFO)
    write(root, "/proc/meminfo", MEMINFO)
    write(root, "/sys/devices/system/cpu/online", "0-7\n")
    for cpu in range(8):
        base = "/sys/devices/system/cpu/cpu%d/" % cpu
        write(root, base + "topology/physical_package_id", "%d\n" % (cpu // 4))
        write(root, base + "topology/core_id", "%d\n" % ((cpu % 4) // 2))
        write(root, base + "cpufreq/scaling_governor", "powersave\n" if cpu == 7 else "performance\n")
    for node, cpus in ((0, "0-3"), (1, "4-7")):
        write(root, "/sys/devices/system/node/node%d/cpulist" % node, cpus + "\n")
        write(root, "/sys/devices/system/node/node%d/meminfo" % node,
              "Node %d MemTotal:       1056822784 kB\nNode %d MemFree:        1000000000 kB\n" % (node, node))
    write(root, "/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    write(root, "/proc/mounts", "/dev/nvme0n1p2 / ext4 rw 0 0\nproc /proc proc rw 0 0\n/dev/sdb1 /data xfs rw 0 0\n"
                                "/dev/nvme0n1p2 /etc/hosts ext4 rw 0 0\nnas:/export /mnt/my\\040share nfs4 rw 0 0\n")
    os.makedirs(str(root / "data"))
    os.makedirs(str(root / "mnt" / "my share"))
    write(root, "/etc/hosts", "")
    for disk, part, rotational in (("nvme0n1", "nvme0n1p2", "0"), ("sdb", "sdb1", "1")):
        # As in sysfs: /sys/class/block/<partition> links into its disk's directory, which holds the queue.
        write(root, "/sys/devices/pci0000:00/%s/%s/partition" % (disk, part), "1\n")
        write(root, "/sys/devices/pci0000:00/%s/queue/rotational" % disk, rotational + "\n")
        os.makedirs(str(root / "sys/class/block"), exist_ok=True)
        os.symlink("../../devices/pci0000:00/%s/%s" % (disk, part), str(root / "sys/class/block" / part))
    write(root, "/etc/os-release", 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nVERSION_ID="22.04"\n')
    write(root, "/sys/class/net/eth0/speed", "100000\n")
    write(root, "/sys/class/net/eth0/mtu", "9000\n")
    write(root, "/sys/class/net/eth0/operstate", "up\n")
    write(root, "/sys/class/net/eth0/device/vendor", "0x15b3\n")
    write(root, "/sys/class/net/docker0/speed", "-1\n")
    write(root, "/sys/class/net/docker0/mtu", "1500\n")
    write(root, "/sys/class/net/lo/mtu", "65536\n")
    write(root, "/sys/class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n")
    write(root, "/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n")
    write(root, "/sys/class/infiniband/mlx5_0/ports/1/phys_state", "5: LinkUp\n")
    write(root, "/sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n")
    return str(root)


def test_cpu_profile(host):
    notes = []
    cpu = _profile.cpu_profile(host, notes)
    assert cpu["model"] == "Intel(R) Xeon(R) Platinum 8480+" and cpu["vendor"] == "GenuineIntel"
    assert (cpu["sockets"], cpu["cores_physical"], cpu["cores_logical"], cpu["threads_per_core"], cpu["numa_nodes"]) == (2, 4, 8, 2, 2)
    assert cpu["governors"] == ["performance", "powersave"]
    assert cpu["isa"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                          "amx_tile", "amx_bf16", "amx_int8"]
    assert notes == []


def test_memory_profile(host):
    memory = _profile.memory_profile(host, [])
    assert memory["total_bytes"] == 2113645568 * 1024 and memory["available_bytes"] == 2000000000 * 1024
    assert memory["hugepages"] == {"total": 16, "free": 12, "size_bytes": 2 * 1024 * 1024, "transparent": "madvise"}
    assert memory["numa"] == [{"node": 0, "total_bytes": 1056822784 * 1024, "free_bytes": 1000000000 * 1024, "cpus": "0-3"},
                              {"node": 1, "total_bytes": 1056822784 * 1024, "free_bytes": 1000000000 * 1024, "cpus": "4-7"}]


def test_storage_profile(host):
    storage = _profile.storage_profile(host, [])
    assert (storage["root_mount"], storage["root_device"], storage["filesystem_type"]) == ("/", "/dev/nvme0n1p2", "ext4")
    assert storage["is_nvme"] is True and storage["is_ssd"] is True
    mounts = dict((m["mount"], m) for m in storage["mounts"])
    assert sorted(mounts) == ["/", "/data", "/mnt/my share"]  # no /proc, no single-file bind mount
    assert mounts["/data"]["rotational"] is True and mounts["/data"]["fs_type"] == "xfs"
    assert mounts["/mnt/my share"]["rotational"] is None and mounts["/mnt/my share"]["fs_type"] == "nfs4"
    assert mounts["/"]["free_bytes"] > 0


def test_network_profile(host):
    network = _profile.network_profile(host, [])
    assert network["nics"] == [
        {"name": "docker0", "speed_mbps": None, "mtu": 1500, "operstate": None, "virtual": True},
        {"name": "eth0", "speed_mbps": 100000, "mtu": 9000, "operstate": "up", "virtual": False},
    ]
    assert network["infiniband"] == [{"device": "mlx5_0", "port": 1, "rate_gbps": 400.0, "rate": "400 Gb/sec (4X NDR)",
                                      "state": "ACTIVE", "link_layer": "InfiniBand"}]


def test_unreadable_sysfs_and_proc_become_notes(host):
    """Doctor's parsers reject garbage; the profile turns that into a note naming the file, never a crash."""
    write(host, "/sys/devices/system/cpu/online", "0-3,x\n")
    write(host, "/proc/mounts", "/dev/nvme0n1p2 / ext4 rw 0 0\nbroken line\n")
    write(host, "/sys/class/infiniband/mlx5_0/ports/1/state", "ACTIVE\n")
    notes = []
    assert _profile.cpu_profile(host, notes)["cores_logical"] == 8  # counted from the cpu<N> directories instead
    storage = _profile.storage_profile(host, notes)
    assert storage["mounts"] == [] and storage["root_mount"] is None
    assert _profile.network_profile(host, notes)["infiniband"] == []
    assert notes == ["/sys/devices/system/cpu/online: cpulist '0-3,x' is not a list of CPU ranges",
                     "/proc/mounts line 2 is not in the kernel's format: 'broken line'",
                     "/proc/mounts unreadable: no storage profile",
                     "InfiniBand: %s/sys/class/infiniband/mlx5_0/ports/1/state: 'ACTIVE' is not 'N: STATE'" % host]


def test_os_profile(host):
    os_info = _profile.os_profile(host, [])
    assert (os_info["name"], os_info["version"], os_info["vm"]) == ("Ubuntu 22.04.4 LTS", "22.04", True)


def test_unreadable_tree_gives_notes_not_errors(tmp_path):
    options = {"timeouts": dict(_run.DEFAULT_TIMEOUTS), "nvidia_smi_path": None, "torch_python": None, "expect": {}}

    def no_nvidia_smi(options):
        raise _command.ProbeAbsent("nvidia-smi not found on PATH")
    absent = {"nvidia_smi": no_nvidia_smi}
    static = _profile.static_profile(options, root=str(tmp_path), probes=absent, inventory={"status": "absent", "reason": "no torch"})
    assert static["gpus"] == [] and static["cpu"]["model"] is None
    assert "GPUs: nvidia-smi not found on PATH" in static["notes"]
    assert "/proc/meminfo unreadable" in static["notes"] and "no torch" in static["notes"]


def test_gpus_come_from_doctors_nvidia_smi_probe():
    data = parse_nvidia_smi(read_fixture("nvidia-smi", "a100-sxm4-v12.xml"))
    gpu = _profile.static_gpu(data["gpus"][0])
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB" and gpu["sku"] == "a100_sxm"
    assert gpu["memory_total_mib"] == data["gpus"][0]["memory"]["total_mib"] > 0
    assert set(gpu["pcie"]) == {"gen_current", "gen_max", "width_current", "width_max"} and gpu["pcie"]["width_max"] == 16


def test_topology_of_a_two_socket_a100_node():
    topo = _profile.parse_topology(read_fixture("nvidia-smi-topo", "della-a100-2gpu.txt"))
    assert topo["devices"] == ["GPU0", "GPU1", "mlx5_0", "mlx5_1"]
    assert topo["links"]["GPU0"] == {"GPU1": "SYS", "mlx5_0": "NODE", "mlx5_1": "SYS"}
    assert topo["cpu_affinity"] == {"GPU0": "0-63", "GPU1": "64-127"}
    assert topo["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}


def test_topology_with_nvlink_pairs():
    topo = _profile.parse_topology(read_fixture("nvidia-smi-topo", "traverse-v100-4gpu-nvlink.txt"))
    assert topo["links"]["GPU2"]["GPU3"] == "NV3" and topo["links"]["GPU0"]["GPU2"] == "SYS"
    assert topo["links"]["mlx5_0"]["mlx5_1"] == "PIX"
    assert topo["numa_affinity"]["GPU3"] == "8"
    assert _profile.parse_topology("") is None


@pytest.mark.parametrize("kwargs, message", [
    ({"benchmarks": ["gpus"]}, "benchmarks: unknown 'gpus'; accepted: cpu, memory, disk, gpu"),
    ({"duration_s": 0}, "duration_s: 0 is not a positive number of seconds"),
    ({"benchmark_options": {"disk": {"file_size": 4}}},
     "benchmark_options.disk: unknown option 'file_size'; accepted: directory, duration_s, file_size_mib, timeout_s, warmup_s"),
    ({"benchmark_options": {"gpu": {"matrix_n": "big"}}}, "benchmark_options.gpu.matrix_n: 'big' is not a positive integer"),
    ({"benchmark_options": {"tpu": {}}}, "benchmark_options: unknown benchmark 'tpu'; accepted: cpu, memory, disk, gpu"),
    ({"benchmarks": ["disk"], "benchmark_options": {"disk": {"directory": "/nonexistent/data"}}},
     "benchmark_options.disk.directory: /nonexistent/data is not an existing directory"),
    ({"expect": {"gpu_bf16_tflops_min": "fast"}}, "expect.gpu_bf16_tflops_min: 'fast' is not a number"),
    ({"timeouts": {"kernel_log": 5}}, "timeouts: unknown 'kernel_log'; accepted: command, nvidia_smi, torch"),
])
def test_bad_options_are_one_line_errors(kwargs, message):
    args = dict(benchmarks=[], benchmark_options=None, warmup_s=1, duration_s=1, sample_interval_s=1, expect=None, timeouts=None)
    args.update(kwargs)
    with pytest.raises(_run.ProfileInputError) as exc:
        _run.validate(**args)
    assert str(exc.value) == message


def test_doctor_expectations_are_accepted_too():
    _run.validate([], None, 1, 1, 1, {"gpu_model": "H100", "disk_read_iops_min": 5000}, None)


def test_run_log_that_cannot_be_opened_is_an_input_error(tmp_path):
    with pytest.raises(_run.ProfileInputError, match=r"run_log: cannot open %s/missing/run.jsonl" % tmp_path):
        _run.run(benchmarks=[], run_log=str(tmp_path / "missing" / "run.jsonl"))


def test_static_only_run_has_the_profile_shape(tmp_path):
    probes = {"nvidia_smi": lambda options: parse_nvidia_smi(read_fixture("nvidia-smi", "a100-sxm4-v12.xml"))}
    result = _run.run(benchmarks=[], probes=probes, run_log=str(tmp_path / "run.jsonl"))
    assert set(result) == {"schema_version", "static_profile", "benchmark_results", "benchmarks", "telemetry", "analysis",
                           "remediation", "run_log", "phases", "total_duration_ms"}
    assert set(result["static_profile"]) >= {"cpu", "memory", "storage", "os", "runtime", "gpus", "network", "notes"}
    assert set(result["benchmarks"]) == {"cpu_sustained", "memory_bandwidth", "gpu_sustained", "disk_random_io"}
    assert all(b["status"] == "skipped" for b in result["benchmarks"].values())
    assert all(row["status"] == "SKIP" for row in result["benchmark_results"])
    assert [g["sku"] for g in result["static_profile"]["gpus"]] == ["a100_sxm"]
    assert set(result["analysis"]) >= {"primary_bottleneck", "secondary_bottleneck", "confidence", "reasons", "recommendations"}
    assert set(result["remediation"]) == {"priority", "actions"}
    assert result["telemetry"] is None and [p["phase"] for p in result["phases"]] == ["static_profile"]
    events = (tmp_path / "run.jsonl").read_text().splitlines()
    assert len(events) == 5 and '"event": "run_end"' in events[-1]


def test_benchmark_results_names_carry_units():
    benches = {
        "cpu_sustained": {"status": "fallback", "message": "m", "single_thread_gflops": 0.05, "all_cores_gflops": 0.1},
        "memory_bandwidth": {"status": "ok", "message": "m", "copy_gbps": 40.0, "triad_gbps": 42.0},
        "disk_random_io": {"status": "error", "message": "disk: directory /x does not exist"},
        "gpu_sustained": {"status": "error", "message": "1 of 2", "gpus": [
            {"index": 0, "status": "ok", "message": None, "bf16_tflops": 700.0, "h2d_gbps": 50.0},
            {"index": 1, "status": "error", "message": "gpu 1 benchmark timed out after 60s"}]},
    }
    rows = dict((row["name"], row) for row in _run._flatten(benches))
    assert rows["cpu_sustained.single_thread_gflops"]["status"] == "WARN"
    expected = {"name": "memory_bandwidth.triad_gbps", "status": "PASS", "result": 42.0, "unit": "GB/s", "message": "m"}
    assert rows["memory_bandwidth.triad_gbps"] == expected
    assert rows["disk_random_io.read_latency_p99_us"]["status"] == "ERROR"
    assert rows["gpu_sustained.gpu0.bf16_tflops"]["result"] == 700.0 and rows["gpu_sustained.gpu0.bf16_tflops"]["unit"] == "TFLOP/s"
    assert rows["gpu_sustained.gpu0.fp32_tflops"]["status"] == "SKIP"  # not measured, not a PASS
    assert rows["gpu_sustained.gpu1.h2d_gbps"]["status"] == "ERROR"
    assert rows["gpu_sustained.gpu1.h2d_gbps"]["message"] == "gpu 1 benchmark timed out after 60s"


def test_a_hung_mount_is_a_note_not_a_hang(host, monkeypatch):
    import threading
    release = threading.Event()
    real_isdir = _profile.os.path.isdir

    def isdir(path):
        if path.endswith("my share"):
            release.wait(30)  # the NFS mount of the fixture host hangs, as a dead server's does
        return real_isdir(path)

    monkeypatch.setattr(_profile.os.path, "isdir", isdir)
    notes = []
    try:
        storage = _profile.storage_profile(host, notes, timeout=0.2)
    finally:
        release.set()
    assert [n for n in notes if "timed out after 0.2s" in n and "hung network mount" in n]
    assert [m["mount"] for m in storage["mounts"]] == ["/", "/data"]
