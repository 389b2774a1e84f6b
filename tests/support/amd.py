"""AMD GPU test data and fakes shared by the unit and integration tests.

amd-smi documents (the recorded MI210 and Strix Halo static output, tests/fixtures/amd/README.md, an RX 6600 built
from the facts of a recording, and those spelt as ROCm 6.0's amd-smi spells them), a sysfs tree of AMD GPUs under a
temporary directory, the probe envelopes the doctor's AMD checks are judged on, and a local-connection host whose
fake amd-smi replays those documents.
"""

import json
import os

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE, PROBE_ROOTS
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import amdgpu_log
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import parse_amd_smi
from ansible_collections.continuum.hydra.tests.support.envelopes import absent, ok
from ansible_collections.continuum.hydra.tests.support.fleet import write_host_bin
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

# amd-smi documents.

MI210_STATIC = read_fixture("amd", "amd-smi", "dme-mi210-static-inbox-driver.json")


def rx6600_metric():
    """``amd-smi metric --json`` of a Radeon RX 6600 under amd-smi 24.x (bare list, no wrapper).

    The values are the facts of the recording in luckylinux/supermicro-fan-control GPU_NOTES.md @1cae1a4a
    (AGPL-3.0, so its file is not copied into the collection; see tests/fixtures/amd/README.md): edge 36 C,
    hotspot 37 C, memory 32 C, socket power 6 W, UNTHROTTLED, gfx 800 of 500-2750 MHz, mem 541 MHz, link x8 at
    16 GT/s, every PCIe counter "N/A", ECC totals 0, ecc_blocks "N/A", xgmi_err "N/A", gfx activity 1 %.
    """
    return [{
        "gpu": 0,
        "usage": {"gfx_activity": {"value": 1, "unit": "%"}, "umc_activity": {"value": 0, "unit": "%"},
                  "mm_activity": {"value": 0, "unit": "%"}, "vcn_activity": ["N/A"] * 4, "jpeg_activity": ["N/A"] * 32},
        "power": {"socket_power": {"value": 6, "unit": "W"}, "gfx_voltage": {"value": "N/A", "unit": "mV"},
                  "soc_voltage": {"value": "N/A", "unit": "mV"}, "mem_voltage": {"value": "N/A", "unit": "mV"},
                  "power_management": "ENABLED", "throttle_status": "UNTHROTTLED"},
        "clock": {"gfx_0": {"clk": {"value": 800, "unit": "MHz"}, "min_clk": {"value": 500, "unit": "MHz"},
                            "max_clk": {"value": 2750, "unit": "MHz"}, "clk_locked": "N/A", "deep_sleep": "DISABLED"},
                  "gfx_1": {"clk": "N/A", "min_clk": "N/A", "max_clk": "N/A", "clk_locked": "N/A", "deep_sleep": "N/A"},
                  "mem_0": {"clk": {"value": 541, "unit": "MHz"}, "min_clk": {"value": 96, "unit": "MHz"},
                            "max_clk": {"value": 875, "unit": "MHz"}, "clk_locked": "N/A", "deep_sleep": "DISABLED"}},
        "temperature": {"edge": {"value": 36, "unit": "C"}, "hotspot": {"value": 37, "unit": "C"},
                        "mem": {"value": 32, "unit": "C"}},
        "pcie": {"width": 8, "speed": {"value": 16, "unit": "GT/s"}, "bandwidth": "N/A", "replay_count": "N/A",
                 "l0_to_recovery_count": "N/A", "replay_roll_over_count": "N/A", "nak_sent_count": "N/A",
                 "nak_received_count": "N/A", "current_bandwidth_sent": "N/A", "current_bandwidth_received": "N/A",
                 "max_packet_size": "N/A"},
        "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 0, "total_deferred_count": 0,
                "cache_correctable_count": "N/A", "cache_uncorrectable_count": "N/A"},
        "ecc_blocks": "N/A",
        "fan": {"speed": 0, "max": 255, "rpm": 0, "usage": {"value": 0.0, "unit": "%"}},
        "voltage_curve": "N/A", "overdrive": "N/A", "perf_level": "AMDSMI_DEV_PERF_LEVEL_AUTO", "xgmi_err": "N/A",
        "energy": {"total_energy_consumption": {"value": 0.0, "unit": "J"}},
        "mem_usage": {"total_vram": {"value": 8176, "unit": "MB"}, "used_vram": {"value": 202, "unit": "MB"},
                      "free_vram": {"value": 7974, "unit": "MB"}},
    }]


def rx6600_static():
    """``amd-smi static --json`` of the same Radeon RX 6600 (amd-smi 24.x, bare list), from the facts of the
    luckylinux recording (AGPL-3.0, not copied): bus.bdf 0000:0b:00.0, x16 Gen 4 max, VBIOS 020.003.000.030.000000,
    power 94..100 W cap 100 W, edge 100/105 C, hotspot 110/115 C, vram 100/105 C, driver "7.0.0-3-pve" (the
    Proxmox kernel's in-box amdgpu), every RAS and partition field "N/A", 8176 MB GDDR6."""
    def unit(value, name):
        return {"value": value, "unit": name}
    return [{
        "gpu": 0,
        "asic": {"market_name": "Navi 23 [Radeon RX 6600/6600 XT", "vendor_id": "0x1002", "device_id": "0x73ff",
                 "rev_id": "0xc7", "asic_serial": "N/A", "oam_id": "N/A"},
        "bus": {"bdf": "0000:0b:00.0", "max_pcie_width": 16, "max_pcie_speed": unit(16, "GT/s"),
                "pcie_interface_version": "Gen 4", "slot_type": "CEM"},
        "vbios": {"name": "73FFHB.20.3.0.30.AS05", "build_date": "2021/12/01 00:51", "part_number": "115-D534P00-100",
                  "version": "020.003.000.030.000000"},
        "limit": {"max_power": unit(100, "W"), "min_power": unit(94, "W"), "socket_power": unit(100, "W"),
                  "slowdown_edge_temperature": unit(100, "C"), "slowdown_hotspot_temperature": unit(110, "C"),
                  "slowdown_vram_temperature": unit(100, "C"), "shutdown_edge_temperature": unit(105, "C"),
                  "shutdown_hotspot_temperature": unit(115, "C"), "shutdown_vram_temperature": unit(105, "C")},
        "driver": {"name": "amdgpu", "version": "7.0.0-3-pve"},
        "board": {"model_number": "N/A", "product_serial": "N/A", "fru_id": "N/A", "product_name": "N/A",
                  "manufacturer_name": "N/A"},
        "ras": {"eeprom_version": "N/A", "parity_schema": "N/A", "single_bit_schema": "N/A", "double_bit_schema": "N/A",
                "poison_schema": "N/A", "ecc_block_state": "N/A"},
        "partition": {"compute_partition": "N/A", "memory_partition": "N/A"},
        "vram": {"type": "GDDR6", "vendor": "MICRON", "size": unit(8176, "MB")},
    }]


def metric_text(doc=None, wrapped=False):
    """``amd-smi metric --json`` text of ``doc`` (default: the RX 6600), bare list or wrapped in ``gpu_data``."""
    doc = rx6600_metric() if doc is None else doc
    return json.dumps({"gpu_data": doc} if wrapped else doc, indent=4)


def with_ecc(uncorrectable=0, deferred=0, umc_uncorrectable=0):
    """The RX 6600 metric text with ECC totals and UMC/XGMI_WAFL ecc_blocks planted."""
    doc = rx6600_metric()
    doc[0]["ecc"].update(total_uncorrectable_count=uncorrectable, total_deferred_count=deferred)
    doc[0]["ecc_blocks"] = {"UMC": {"correctable_count": 0, "uncorrectable_count": umc_uncorrectable, "deferred_count": 0},
                            "XGMI_WAFL": {"correctable_count": 0, "uncorrectable_count": 0, "deferred_count": 0}}
    return metric_text(doc)


# amd-smi documents of other releases and planted faults, made from the recordings above.

STRIX_STATIC = read_fixture("amd", "amd-smi", "gkm-strixhalo-8060s-static-inbox-driver.json")
STRIX_LIST = read_fixture("amd", "amd-smi", "gkm-strixhalo-8060s-list.json")
# The MI210 recording's RAS blocks with ECC enabled (XGMI_WAFL is DISABLED there).
MI210_ENABLED = ("UMC", "SDMA", "GFX", "MMHUB", "PCIE_BIF", "HDP")


def bare(tree):
    """{"value": N, "unit": U} -> N all through a document (what amd-smi wrote before ROCm 6.1)."""
    if isinstance(tree, dict):
        return tree["value"] if set(tree) == {"value", "unit"} else dict((k, bare(v)) for k, v in tree.items())
    if isinstance(tree, list):
        return [bare(v) for v in tree]
    return tree


def rocm60_metric(uncorrectable=0, xgmi="AMDSMI_XGMI_STATUS_NO_ERRORS"):
    """The RX 6600 metric above as ROCm 6.0's amd-smi spells it, with the MI210's ECC blocks.

    The spellings are those of AMD's own CLI (ROCm/amdsmi `amdsmi_cli/amdsmi_commands.py` at the tag rocm-6.0.0):
    bare numbers, `power.current_power`, `pcie.current_lanes` / `current_speed`, `ecc.total_correctable` /
    `total_uncorrectable`, `ecc_block`, `usage.gfx_usage` / `mem_usage`, clocks `gfx` / `MEM` with `cur_clk`,
    `xgmi_err` as the library's status name. No ROCm 6.0 recording is public: the values move, nothing else."""
    new = bare(rx6600_metric()[0])
    power, pcie, usage, clock = new["power"], new["pcie"], new["usage"], new["clock"]
    return [{
        "gpu": 0,
        "usage": {"gfx_usage": usage["gfx_activity"], "mem_usage": usage["umc_activity"], "mm_ip_usage": usage["mm_activity"]},
        "power": {"current_power": power["socket_power"], "current_gfx_voltage": power["gfx_voltage"],
                  "current_soc_voltage": power["soc_voltage"], "current_mem_voltage": power["mem_voltage"],
                  "power_limit": "N/A", "power_management": power["power_management"],
                  "throttle_status": power["throttle_status"]},
        "clock": {"gfx": {"cur_clk": clock["gfx_0"]["clk"], "max_clk": clock["gfx_0"]["max_clk"],
                          "min_clk": clock["gfx_0"]["min_clk"], "sleep_clk": "N/A", "is_clk_locked": "N/A"},
                  "MEM": {"cur_clk": clock["mem_0"]["clk"], "max_clk": clock["mem_0"]["max_clk"],
                          "min_clk": clock["mem_0"]["min_clk"], "sleep_clk": "N/A"}},
        "temperature": new["temperature"],
        "ecc": {"total_correctable": 0, "total_uncorrectable": uncorrectable, "cache_correctable": 0,
                "cache_uncorrectable": 0},
        "pcie": {"current_lanes": pcie["width"], "current_speed": pcie["speed"], "replay_count": "N/A",
                 "l0_to_recovery_count": "N/A", "replay_roll_over_count": "N/A", "nak_sent_count": "N/A",
                 "nak_received_count": "N/A", "current_bandwidth_sent": "N/A", "current_bandwidth_received": "N/A",
                 "max_packet_size": "N/A"},
        "ecc_block": dict((block, {"correctable": 0, "uncorrectable": uncorrectable if block == "UMC" else 0})
                          for block in MI210_ENABLED),
        "xgmi_err": xgmi,
        "mem_usage": dict((key, new["mem_usage"][key]) for key in ("total_vram", "used_vram", "free_vram")),
    }]


def rocm60_static():
    """The recorded MI210 static as ROCm 6.0's amd-smi spells it (same source): bare numbers, limit.current_power
    (no min_power), the library's driver_version and vram_size_mb, ecc_block_state as a list of {block, status}."""
    old = bare(json.loads(MI210_STATIC)["gpu_data"][0])
    limit = old["limit"]
    old["limit"] = dict(limit, current_power=limit.pop("socket_power"))
    del old["limit"]["min_power"]
    old["driver"] = {"driver_name": "amdgpu", "driver_version": old["driver"]["version"], "driver_date": "N/A"}
    old["vram"] = {"vram_type": old["vram"]["type"], "vram_vendor": old["vram"]["vendor"],
                   "vram_size_mb": old["vram"]["size"]}
    old["ras"]["ecc_block_state"] = [{"block": block, "status": state} for block, state in old["ras"]["ecc_block_state"].items()]
    old["bus"] = dict(old["bus"], pcie_interface_version=4)
    return [old]


def every_leaf_na(tree):
    """A metric document as amd-smi writes it when every library call fails: "N/A" in place of every reading."""
    if isinstance(tree, dict):
        return "N/A" if "value" in tree else dict((k, every_leaf_na(v)) for k, v in tree.items())
    if isinstance(tree, list):
        return [every_leaf_na(v) for v in tree]
    return "N/A" if isinstance(tree, (int, float)) and not isinstance(tree, bool) else tree


# A sysfs tree of AMD GPUs under a temporary directory.

MI300X = "0000:05:00.0"
MI210 = "0000:83:00.0"


def write(root, path, text):
    """Write ``text`` to ``path`` under ``root``, making its folders."""
    full = os.path.join(str(root), path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)


def pci_function(root, address, vendor, pci_class, driver=None):
    """A PCI function under ``root``'s sys/bus/pci/devices, bound to ``driver`` if given; its folder."""
    base = "sys/bus/pci/devices/%s" % address
    write(root, base + "/vendor", vendor + "\n")
    write(root, base + "/class", pci_class + "\n")
    write(root, base + "/device", "0x74a1\n")
    if driver:
        os.makedirs(os.path.join(str(root), "sys/bus/pci/drivers", driver), exist_ok=True)
        os.symlink(os.path.join(str(root), "sys/bus/pci/drivers", driver), os.path.join(str(root), base, "driver"))
    return os.path.join(str(root), base)


def drm_card(root, number, device_dir):
    """sys/class/drm/card``number`` under ``root``, its device link pointing at ``device_dir``."""
    os.makedirs(os.path.join(str(root), "sys/class/drm/card%d" % number), exist_ok=True)
    os.symlink(device_dir, os.path.join(str(root), "sys/class/drm/card%d" % number, "device"))


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


# Probe envelopes and the doctor's checks judged on them.


def amd(inventory, pci_gpus=(), kfd=None, module=None):
    """What the amd_smi probe adds around a reader's inventory."""
    return dict(inventory, pci_gpus=list(pci_gpus), kfd=kfd, replay_window_s=1.0,
                kernel_module=module or {"loaded": True, "version": None, "kind": "in-box"})


def log_envelope(text="", hours=24):
    """The amdgpu_log probe's envelope of a scanned kernel log."""
    return ok(dict(amdgpu_log.scan(text), source="journalctl", journal_problem=None, window_hours=hours, window_applied=True))


def defaults():
    """An AMD host: no NVIDIA driver, nothing in the kernel log."""
    return {
        "nvidia_smi": absent("nvidia-smi not found on PATH (no NVIDIA driver installed?)"),
        "nvidia_pci": ok({"gpus": [], "nvswitches": []}),
        "kernel_module": absent("the nvidia kernel module is not loaded"),
        "host": ok({"is_container": False, "is_vm": False, "is_wsl": False}),
        "amd_smi": absent("no AMD GPU: amd-smi and rocm-smi not on PATH and no AMD GPU on the PCI bus"),
        "amdgpu_log": log_envelope(),
    }


def judge(check_id, data=None, expect=None, **envelopes):
    """The record of one catalogue check on the AMD host's probes, ``data`` as the amd_smi probe's and ``envelopes`` replacing probes."""
    (chk,) = [c for c in CATALOGUE if c.id == check_id]
    probes = defaults()
    if data is not None:
        probes["amd_smi"] = ok(data)
    probes.update(envelopes)
    return registry.evaluate(chk, dict((name, probes.get(name) or absent("not probed")) for name in chk.probes),
                             expect or {}, registry.roots_for(CATALOGUE, PROBE_ROOTS))


def amd_smi_data(metric=None):
    """The amd_smi probe's data of the recorded MI210 static output with ``metric`` (default: the RX 6600's)."""
    return amd(parse_amd_smi(MI210_STATIC, metric or metric_text()))


# A local-connection host with a fake amd-smi (tests/support/fleet.py).

MI210_LIST = json.dumps([{"gpu": 0, "bdf": "0000:83:00.0", "uuid": "8cff73bf-0000-1000-80b6-e1b5b5a08d0f"}])


def tool(bindir, name, body):
    """An executable shell script ``name`` in ``bindir``."""
    path = os.path.join(bindir, name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


def amd_smi_host(root, host, metric, kernel_log=""):
    """The host's bin directory: a fake amd-smi answering list, static (the MI210 recording) and ``metric``."""
    bindir = write_host_bin(root, host, kernel_log=kernel_log)
    files = {}
    for sub, text in (("list", MI210_LIST), ("static", MI210_STATIC), ("metric", metric)):
        files[sub] = os.path.join(root, host, "amd-smi-%s.json" % sub)
        with open(files[sub], "w") as handle:
            handle.write(text)
    tool(bindir, "amd-smi", 'case "$1 $2" in "list --json") exec cat "%s";; "static --json") exec cat "%s";; '
                            '"metric --json") exec cat "%s";; esac\nexit 2\n' % (files["list"], files["static"], files["metric"]))
    return bindir
