"""AMD GPUs from a sysfs tree laid out under a temporary directory: PCI classes, KFD nodes, RAS files, hwmon."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_sysfs
from ansible_collections.continuum.hydra.tests.support.amd import MI210, MI300X, build_host, write


@pytest.fixture
def host(tmp_path):
    return build_host(tmp_path)


def test_pci_lists_amd_gpus_of_every_gpu_class_and_nothing_else(host):
    found = amd_sysfs.scan_pci(host)
    assert [(g["address"], g["class"], g["driver"]) for g in found] == [
        (MI300X, "0x120000", "amdgpu"), (MI210, "0x038000", None)]


def test_kfd_counts_gpu_nodes_only_and_names_their_address(host):
    assert amd_sysfs.read_kfd(host) == {"gpu_nodes": 1, "nodes": [
        {"node": "1", "simd_count": 1216, "gpu_id": "54970", "pci": "0000:05:00"}]}
    assert amd_sysfs.read_kfd(os.path.join(host, "nowhere")) is None


def test_dkms_and_in_box_module(host, tmp_path):
    assert amd_sysfs.read_module(host) == {"loaded": True, "version": "6.10.5", "kind": "dkms"}
    os.remove(os.path.join(host, "sys/module/amdgpu/version"))
    assert amd_sysfs.read_module(host) == {"loaded": True, "version": None, "kind": "in-box"}
    assert amd_sysfs.read_module(str(tmp_path / "empty"))["loaded"] is False


def test_a_card_record_from_sysfs(host):
    inventory = amd_sysfs.read_gpus(host)
    assert (inventory["source"], inventory["driver_version"], inventory["driver_kind"]) == ("sysfs", "6.10.5", "dkms")
    (gpu,) = inventory["gpus"]  # card1-DP-1 is a connector, not a card
    assert gpu["pci_bus_id"] == MI300X and gpu["name"] == "AMD Instinct MI300X" and gpu["unreadable"] == {}
    # No edge sensor on MI300X: the junction is judged, against its own crit/emergency limits.
    assert (gpu["temperature"]["sensor"], gpu["temperature"]["gpu_c"], gpu["temperature"]["slowdown_c"],
            gpu["temperature"]["shutdown_c"], gpu["temperature"]["memory_max_c"]) == ("hotspot", 41, 110, 115, 95)
    assert (gpu["power"]["draw_w"], gpu["power"]["limit_w"], gpu["power"]["default_limit_w"]) == (133, 750, 750)
    assert (gpu["pcie"]["gen_current"], gpu["pcie"]["gen_max"], gpu["pcie"]["width_current"]) == (5, 5, 16)
    assert gpu["bad_pages"] == {"retired": 1, "pending": 1, "unreservable": 0, "threshold": None}
    assert gpu["ecc"]["volatile"]["correctable"] == 2 and gpu["ecc"]["volatile"]["uncorrectable"] == 0
    assert gpu["ras_blocks"]["XGMI_WAFL"] == {"uncorrectable": 0, "correctable": 0, "deferred": None, "enabled": True}
    assert (gpu["partition"]["compute"], gpu["partition"]["memory"]) == ("SPX", "NPS1")
    assert gpu["memory"]["total_mib"] == 192 * 1024


@pytest.mark.parametrize("content, expected", [
    ("ue: 0\nce: 0\n", {"uncorrectable": 0, "correctable": 0, "deferred": None}),
    ("ue: 1\nce: 7\nde: 2\n", {"uncorrectable": 1, "correctable": 7, "deferred": 2}),
    (None, {"uncorrectable": None, "correctable": None, "deferred": None}),
])
def test_err_count_files(content, expected):
    assert amd_sysfs.parse_err_count(content) == expected


def test_garbage_in_a_ras_file_is_unreadable(host):
    write(host, "sys/bus/pci/devices/%s/ras/umc_err_count" % MI300X, "ue: lots\nce: 0\n")
    gpu = amd_sysfs.read_gpus(host)["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] is None and "ecc.volatile.uncorrectable" in gpu["unreadable"]
