"""The host probe: runtime detection and NCCL settings, on this machine and on its recorded files."""

import os
import platform
import sys

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import host
from ansible_collections.continuum.hydra.plugins.module_utils._host import runtime
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.host_tree import copy_host_tree

OPTIONS = {"timeouts": {"command": 10}, "expect": {}}


def test_this_machine():
    data = host.probe_host(OPTIONS)
    assert data["python_executable"] == sys.executable and data["python_version"] == platform.python_version()
    assert data["kernel"] == platform.release()
    assert data["logical_cpus"] == os.cpu_count()
    with open("/proc/meminfo") as handle:
        assert data["memory_total_bytes"] == int(handle.readline().split()[1]) * 1024
    if os.path.exists("/.dockerenv") and not os.path.exists("/run/.containerenv") and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        assert data["container_runtime"] == "docker" and data["is_container"] is True
    with open("/proc/cpuinfo") as handle:
        assert data["is_vm"] == (" hypervisor" in handle.read() or data["dmi_product"] is not None and data["hypervisor"] is not None)


def test_recorded_files_of_this_machine(tmp_path):
    copy_host_tree(tmp_path)
    data = host.probe_host(OPTIONS, root=str(tmp_path), environ={})
    assert data["os_id"] == "debian" and data["os_version_id"] == "12"
    assert data["cpu_model"] == "AMD EPYC" and data["is_vm"] is True and data["hypervisor"] == "unknown hypervisor"
    assert data["container_runtime"] is None  # the recording has no /.dockerenv: only the real root does
    meminfo_kib = int(read_fixture("hosts", "debian12-vm", "proc/meminfo").split()[1])
    assert data["memory_total_bytes"] == meminfo_kib * 1024


def test_container_runtimes(tmp_path):
    assert runtime.detect_container("0::/\n", str(tmp_path), {}) is None
    assert runtime.detect_container("0::/\n", str(tmp_path), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"
    assert runtime.detect_container("12:memory:/kubepods/burstable/pod1/abc\n", str(tmp_path), {}) == "kubernetes"
    (tmp_path / "run").mkdir()
    (tmp_path / "run/.containerenv").write_text("")
    assert runtime.detect_container("0::/\n", str(tmp_path), {}) == "podman"


def test_hypervisor_from_dmi():
    assert runtime.detect_hypervisor(False, "Amazon EC2", "p5.48xlarge") == "Amazon EC2"
    assert runtime.detect_hypervisor(True, "QEMU", "Standard PC (Q35 + ICH9, 2009)") == "QEMU"
    assert runtime.detect_hypervisor(False, "Dell Inc.", "PowerEdge XE9680") is None
    assert runtime.detect_hypervisor(True, None, None) == "unknown hypervisor"


def test_nccl_settings_precedence_environment_user_file_system_file(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nccl.conf").write_text("# site defaults\nNCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5\nNCCL_SOCKET_IFNAME=eth0\n")
    user = tmp_path / "user.conf"
    user.write_text("NCCL_SOCKET_IFNAME = ib0  # user's choice\nNCCL_P2P_DISABLE=1\n")
    environ = {"NCCL_DEBUG": "INFO", "NCCL_CONF_FILE": str(user), "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "HOME": "/root"}
    settings = host.probe_host(OPTIONS, root=str(tmp_path), environ=environ)["nccl_settings"]
    assert settings == {
        "NCCL_DEBUG": {"value": "INFO", "source": "environment"},
        "NCCL_CONF_FILE": {"value": str(user), "source": "environment"},
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": {"value": "1", "source": "environment"},
        "NCCL_SOCKET_IFNAME": {"value": "ib0", "source": str(user)},
        "NCCL_P2P_DISABLE": {"value": "1", "source": str(user)},
        "NCCL_IB_HCA": {"value": "mlx5", "source": str(tmp_path / "etc/nccl.conf")},
    }


def test_garbage_files_do_not_break_the_host_probe(tmp_path):
    copy_host_tree(tmp_path)
    (tmp_path / "proc/meminfo").write_text("MemTotal: lots\n")
    (tmp_path / "etc/os-release").write_bytes(b"\xff\xfe garbage")
    data = host.probe_host(OPTIONS, root=str(tmp_path), environ={})
    assert data["memory_total_bytes"] is None and data["os_id"] is None
    assert data["logical_cpus"] >= 1


def test_a_fifo_as_nccl_conf_is_an_error_of_that_file_not_a_hang(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    fifo = home / ".nccl.conf"
    os.mkfifo(str(fifo))  # no writer: open() blocks like a read on a hung NFS home
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nccl.conf").write_text("NCCL_DEBUG=WARN\n")
    try:
        data = host.probe_host({"timeouts": {"command": 0.2}}, root=str(tmp_path), environ={"HOME": str(home)})
    finally:
        try:
            os.close(os.open(str(fifo), os.O_WRONLY | os.O_NONBLOCK))  # let the stuck reader go
        except OSError:
            pass
    assert data["nccl_conf_errors"] == ["read(%s) timed out after 0.2s" % fifo]
    assert data["nccl_settings"] == {"NCCL_DEBUG": {"value": "WARN", "source": str(tmp_path / "etc/nccl.conf")}}


def test_an_unreadable_nccl_conf_is_listed_a_missing_one_is_not(tmp_path):
    (tmp_path / "etc").mkdir()
    directory = tmp_path / "etc/nccl.conf"
    directory.mkdir()  # exists, cannot be read as a file
    data = host.probe_host(OPTIONS, root=str(tmp_path), environ={"HOME": str(tmp_path / "nohome")})
    assert len(data["nccl_conf_errors"]) == 1 and str(directory) in data["nccl_conf_errors"][0]
    assert data["nccl_settings"] == {}
