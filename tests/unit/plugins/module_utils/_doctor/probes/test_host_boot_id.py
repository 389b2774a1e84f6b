"""The host probe's boot id: what tells the fleet report's findings that a host rebooted."""

import os

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import host

OPTIONS = {"timeouts": {"command": 10}, "expect": {}}


def test_boot_id_is_read_from_the_kernel(tmp_path):
    path = tmp_path / "proc" / "sys" / "kernel" / "random"
    path.mkdir(parents=True)
    (path / "boot_id").write_text("8b0e4c2a-51d4-4f63-9d2e-0d3c6a1f7e55\n")
    assert host.probe_host(OPTIONS, root=str(tmp_path), environ={})["boot_id"] == "8b0e4c2a-51d4-4f63-9d2e-0d3c6a1f7e55"


def test_no_boot_id_file_is_none(tmp_path):
    assert host.probe_host(OPTIONS, root=str(tmp_path), environ={})["boot_id"] is None


def test_this_machine():
    if os.path.exists("/proc/sys/kernel/random/boot_id"):
        with open("/proc/sys/kernel/random/boot_id") as handle:
            assert host.probe_host(OPTIONS)["boot_id"] == handle.read().strip()
