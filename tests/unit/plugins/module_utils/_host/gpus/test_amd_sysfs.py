"""AMD GPUs from a sysfs tree laid out under a temporary directory: PCI classes, KFD nodes, RAS files, hwmon."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_sysfs

MI300X = "0000:05:00.0"
MI210 = "0000:83:00.0"


def write(root, path, text):
    full = os.path.join(str(root), path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)


def pci_function(root, address, vendor, pci_class, driver=None):
    base = "sys/bus/pci/devices/%s" % address
    write(root, base + "/vendor", vendor + "\n")
    write(root, base + "/class", pci_class + "\n")
    write(root, base + "/device", "0x74a1\n")
    if driver:
        os.makedirs(os.path.join(str(root), "sys/bus/pci/drivers", driver), exist_ok=True)
        os.symlink(os.path.join(str(root), "sys/bus/pci/drivers", driver), os.path.join(str(root), base, "driver"))
    return os.path.join(str(root), base)


def drm_card(root, number, device_dir):
    os.makedirs(os.path.join(str(root), "sys/class/drm/card%d" % number), exist_ok=True)
    os.symlink(device_dir, os.path.join(str(root), "sys/class/drm/card%d" % number, "device"))


@pytest.fixture
def host(tmp_path):
    return build_host(tmp_path)


def build_host(tmp_path):
    """An MI300X (class 0x1200, not VGA) and its HDMI audio function, an MI210 (0x0380) left unbound (failed init),
    an NVIDIA GPU and an AMD CPU function; the MI300X's sysfs files, hwmon, RAS files, the DKMS module and KFD."""
    mi300x = pci_function(tmp_path, MI300X, "0x1002", "0x120000", "amdgpu")
    pci_function(tmp_path, "0000:05:00.1", "0x1002", "0x040300", "snd_hda_intel")  # HDMI audio: not a GPU
    pci_function(tmp_path, MI210, "0x1002", "0x038000", None)  # not bound: failed init
    pci_function(tmp_path, "0000:3b:00.0", "0x10de", "0x030200", "nvidia")
    pci_function(tmp_path, "0000:00:18.0", "0x1022", "0x060000")  # AMD CPU (vendor 0x1022): not a GPU
    drm_card(tmp_path, 1, mi300x)
    write(tmp_path, "sys/class/drm/card1-DP-1/status", "disconnected\n")
    device = "sys/bus/pci/devices/%s/" % MI300X
    for name, value in (("current_link_speed", "32.0 GT/s PCIe"), ("max_link_speed", "32.0 GT/s PCIe"),
                        ("current_link_width", "16"), ("max_link_width", "16"), ("pcie_replay_count", "0"),
                        ("gpu_busy_percent", "0"), ("mem_info_vram_total", str(192 * 1024 ** 3)),
                        ("mem_info_vram_used", str(300 * 1024 ** 2)), ("product_name", "AMD Instinct MI300X"),
                        ("unique_id", "2a8f0c5d3e4b1f60"), ("vbios_version", "113-M3000100-102"),
                        ("current_compute_partition", "SPX"), ("current_memory_partition", "NPS1")):
        write(tmp_path, device + name, value + "\n")
    hwmon = device + "hwmon/hwmon3/"
    for position, label, value, crit, emergency in ((2, "junction", 41000, 110000, 115000), (3, "mem", 38000, 95000, 105000)):
        write(tmp_path, hwmon + "temp%d_label" % position, label + "\n")
        write(tmp_path, hwmon + "temp%d_input" % position, "%d\n" % value)
        write(tmp_path, hwmon + "temp%d_crit" % position, "%d\n" % crit)
        write(tmp_path, hwmon + "temp%d_emergency" % position, "%d\n" % emergency)
    for name, value in (("power1_average", 133000000), ("power1_cap", 750000000), ("power1_cap_default", 750000000),
                        ("power1_cap_max", 750000000), ("power1_cap_min", 0), ("freq1_input", 131000000)):
        write(tmp_path, hwmon + name, "%d\n" % value)
    write(tmp_path, device + "ras/umc_err_count", "ue: 0\nce: 2\n")
    write(tmp_path, device + "ras/xgmi_wafl_err_count", "ue: 0\nce: 0\n")
    write(tmp_path, device + "ras/gpu_vram_bad_pages", "0x00000b4c : 0x00001000 : R\n0x00000c11 : 0x00001000 : P\n")
    write(tmp_path, "sys/module/amdgpu/version", "6.10.5\n")
    # KFD: node 0 is the CPU (simd_count 0), node 1 the MI300X (location_id = bus << 8 | device << 3).
    write(tmp_path, "sys/class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 96\nsimd_count 0\n")
    write(tmp_path, "sys/class/kfd/kfd/topology/nodes/1/properties",
          "cpu_cores_count 0\nsimd_count 1216\nlocation_id 1280\ndomain 0\n")
    write(tmp_path, "sys/class/kfd/kfd/topology/nodes/1/gpu_id", "54970\n")
    return str(tmp_path)


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
