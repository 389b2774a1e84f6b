"""_host.procfs: one parser per kernel format, on recorded files of a real host and on planted text."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import procfs
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

HOST = "debian12-vm"

ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve sve2 bf16 i8mm
CPU implementer\t: 0x41
CPU part\t: 0xd4f

processor\t: 1
Features\t: fp asimd

Model\t: Example Arm board
"""


def test_cpuinfo_of_a_recorded_amd_vm():
    info = procfs.parse_cpuinfo(read_fixture("hosts", HOST, "proc/cpuinfo"))
    assert info["model"] == "AMD EPYC" and info["vendor"] == "AuthenticAMD"
    assert info["logical_cpus"] == 2 and info["hypervisor"] is True
    assert "sse4_2" in info["flags"] and "fma" in info["flags"] and info["machine_model"] is None


def test_cpuinfo_of_an_arm_machine_and_of_nothing():
    info = procfs.parse_cpuinfo(ARM_CPUINFO)
    assert info["model"] is None and info["machine_model"] == "Example Arm board"
    assert info["vendor"] == "0x41" and info["logical_cpus"] == 2 and info["hypervisor"] is False
    assert info["flags"][:2] == ["fp", "asimd"] and "sve2" in info["flags"]  # the first processor's Features
    assert procfs.parse_cpuinfo(None) == {"model": None, "machine_model": None, "vendor": None, "flags": [],
                                          "logical_cpus": None, "hypervisor": False}


def test_meminfo_host_and_node():
    text = read_fixture("hosts", HOST, "proc/meminfo")
    values = procfs.parse_meminfo(text)
    assert values["MemTotal"] == 24684084 and values["MemAvailable"] == 24255984
    assert procfs.meminfo_kib(text) == 24684084 and procfs.meminfo_kib(text, "MemAvailable") == 24255984
    assert procfs.meminfo_kib(text, "NoSuchKey") is None and procfs.meminfo_kib(None) is None
    node = "Node 1 MemTotal:       1056822784 kB\nNode 1 MemFree:        1000000000 kB\nNode 1 Bogus: x kB\n"
    assert procfs.parse_meminfo(node) == {"MemTotal": 1056822784, "MemFree": 1000000000}
    assert procfs.node_memtotal_kib(node, "/sys/devices/system/node/node1/meminfo") == 1056822784
    recorded = read_fixture("hosts", HOST, "sys/devices/system/node/node0/meminfo")  # one parser for both files
    assert procfs.node_memtotal_kib(recorded, "node0/meminfo") == procfs.parse_meminfo(recorded)["MemTotal"] == 5859532
    with pytest.raises(ProbeError, match=r"node1/meminfo: no 'MemTotal: N kB' line"):
        procfs.node_memtotal_kib("Node 1 MemFree: 5 kB\n", "/sys/devices/system/node/node1/meminfo")


def test_mount_tables_agree_and_unescape_octal():
    info = procfs.parse_mountinfo(read_fixture("hosts", HOST, "proc/self/mountinfo"))
    mounts = procfs.parse_proc_mounts(read_fixture("hosts", HOST, "proc/mounts"))
    assert "/" in [m["mount_point"] for m in info] and "/" in [m["mount_point"] for m in mounts]
    assert {m["fstype"] for m in info if m["mount_point"] == "/proc"} == {"proc"}
    planted = "server:/export\\040dir /mnt/my\\040share nfs4 rw,relatime 0 0\n"
    (mount,) = procfs.parse_proc_mounts(planted)
    assert mount["mount_point"] == "/mnt/my share" and mount["source"] == "server:/export\\040dir"
    assert procfs.unescape_mount_field(mount["source"]) == "server:/export dir"
    assert procfs.unescape_mount_field("a\\011b\\134c") == "a\tb\\c"
    line = "36 25 0:32 /a\\040b /mnt/x\\040y rw - ext4 /dev/sda1 rw,noatime\n"
    assert procfs.parse_mountinfo(line) == [{"root": "/a b", "mount_point": "/mnt/x y", "fstype": "ext4",
                                             "source": "/dev/sda1", "super_options": ["rw", "noatime"]}]
    with pytest.raises(ProbeError, match="mountinfo line 1"):
        procfs.parse_mountinfo("garbage\n")
    with pytest.raises(ProbeError, match="/proc/mounts line 2 is not in the kernel's format: 'broken line'"):
        procfs.parse_proc_mounts("/dev/sda1 / ext4 rw 0 0\nbroken line\n")


def test_os_release_and_cpulist():
    release = procfs.parse_os_release(read_fixture("hosts", HOST, "etc/os-release"))
    assert release["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)" and release["VERSION_ID"] == "12"
    assert procfs.parse_os_release(None) == {}
    assert procfs.parse_cpulist("0-3,8-9,12\n") == [0, 1, 2, 3, 8, 9, 12]
    assert procfs.parse_cpulist("\n") == []
    with pytest.raises(ProbeError, match="cpulist '0-3,x' is not a list of CPU ranges"):
        procfs.parse_cpulist("0-3,x")
