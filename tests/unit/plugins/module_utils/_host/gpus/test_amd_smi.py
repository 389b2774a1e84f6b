"""amd-smi JSON -> GPU records, on recorded amd-smi output (tests/fixtures/amd/README.md) in both shapes."""

import copy
import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import AmdSmiParseError, parse_amd_smi
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

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


def metric_text(doc=None, wrapped=False):
    doc = rx6600_metric() if doc is None else doc
    return json.dumps({"gpu_data": doc} if wrapped else doc, indent=4)


def with_ecc(uncorrectable=0, deferred=0, umc_uncorrectable=0):
    doc = rx6600_metric()
    doc[0]["ecc"].update(total_uncorrectable_count=uncorrectable, total_deferred_count=deferred)
    doc[0]["ecc_blocks"] = {"UMC": {"correctable_count": 0, "uncorrectable_count": umc_uncorrectable, "deferred_count": 0},
                            "XGMI_WAFL": {"correctable_count": 0, "uncorrectable_count": 0, "deferred_count": 0}}
    return metric_text(doc)


def test_mi210_static_and_a_24x_metric_list_give_one_full_record():
    inventory = parse_amd_smi(MI210_STATIC, metric_text())
    assert (inventory["vendor"], inventory["source"]) == ("amd", "amd-smi")
    # In-box driver: amd-smi reports the kernel banner with spaces stripped, not a driver version.
    assert (inventory["driver_version"], inventory["driver_kind"], inventory["kernel_release"]) == (
        None, "in-box", "6.14.0-24-generic")
    (gpu,) = inventory["gpus"]
    assert gpu["vendor"] == "amd" and gpu["name"] == "AMD Instinct MI210" and gpu["architecture"] == "gfx90a"
    assert gpu["temperature"]["sensor"] == "hotspot"
    assert (gpu["temperature"]["gpu_c"], gpu["temperature"]["slowdown_c"], gpu["temperature"]["shutdown_c"]) == (37, 100, 105)
    assert (gpu["temperature"]["edge_c"], gpu["temperature"]["memory_c"], gpu["temperature"]["memory_max_c"]) == (36, 32, 94)
    assert gpu["power"] == {"draw_w": 6, "limit_w": 300, "default_limit_w": None, "min_limit_w": 0, "max_limit_w": 300}
    assert (gpu["pcie"]["width_current"], gpu["pcie"]["width_max"], gpu["pcie"]["gen_current"], gpu["pcie"]["gen_max"]) == (8, 16, 4, 4)
    # "N/A" is absent, never a zero and never unreadable.
    assert gpu["pcie"]["replay_counter"] is None and gpu["unreadable"] == {}
    assert gpu["bad_pages"]["threshold"] == 655 and gpu["ecc"]["current"] == "Enabled"
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 0
    assert (gpu["clocks"]["sm_mhz"], gpu["max_clocks"]["sm_mhz"], gpu["clocks"]["memory_mhz"]) == (800, 2750, 541)
    assert gpu["clock_event_reasons"] == {"throttled": False}
    assert gpu["memory"] == {"total_mib": 8176, "used_mib": 202}
    json.dumps(inventory, allow_nan=False)


def test_the_wrapped_shape_and_the_bare_list_read_the_same():
    assert parse_amd_smi(MI210_STATIC, metric_text(wrapped=True)) == parse_amd_smi(MI210_STATIC, metric_text())


def test_warnings_printed_before_the_json_are_skipped():
    noisy = "WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status\n\n" + metric_text()
    assert parse_amd_smi(MI210_STATIC, noisy)["gpus"][0]["power"]["draw_w"] == 6


def test_a_planted_uncorrectable_count_is_in_the_record():
    gpu = parse_amd_smi(MI210_STATIC, with_ecc(uncorrectable=3, umc_uncorrectable=3))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 3 and gpu["ecc"]["volatile"]["dram_uncorrectable"] == 3
    assert gpu["ras_blocks"]["UMC"] == {"enabled": True, "correctable": 0, "uncorrectable": 3, "deferred": 0}
    # XGMI_WAFL is DISABLED in the MI210 recording: its block is marked so.
    assert gpu["ras_blocks"]["XGMI_WAFL"]["enabled"] is False


def test_ecc_counts_of_a_gpu_without_enabled_ecc_are_not_judged():
    static = json.loads(MI210_STATIC)
    static["gpu_data"][0]["ras"] = "N/A"  # Radeon boards: no RAS section
    gpu = parse_amd_smi(json.dumps(static), with_ecc(uncorrectable=4194240))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] is None and gpu["ecc"]["current"] is None


@pytest.mark.parametrize("value, shown", [
    ("AMDSMI_STATUS_NO_PERM", "AMDSMI_STATUS_NO_PERM"),
    ("hot", "hot"),
    ({"value": "1e999", "unit": "C"}, "value out of range"),
])
def test_garbage_where_a_number_belongs_is_unreadable_not_absent(value, shown):
    doc = rx6600_metric()
    doc[0]["temperature"]["hotspot"] = value
    gpu = parse_amd_smi(MI210_STATIC, metric_text(doc))["gpus"][0]
    assert shown in gpu["unreadable"]["temperature.hotspot_c"]
    # The edge sensor is judged instead, against the edge limits.
    assert (gpu["temperature"]["sensor"], gpu["temperature"]["gpu_c"], gpu["temperature"]["slowdown_c"]) == ("edge", 36, 99)


@pytest.mark.parametrize("text, words", [
    ("", "empty output"),
    ("amd-smi: command not found", "no JSON"),
    ("[{\"gpu\": 0, ", "amd-smi metric"),
    ("{\"error\": 1}", "expected a list of GPU objects"),
    ("[{\"gpu\": \"zero\"}]", "is not a number"),
])
def test_bad_output_is_one_clear_error(text, words):
    with pytest.raises(AmdSmiParseError, match=words):
        parse_amd_smi(MI210_STATIC, text)


def test_list_gives_addresses_and_partitions_and_a_broken_list_is_a_problem_not_a_failure():
    listing = json.dumps([{"gpu": 0, "bdf": "0000:83:00.0", "uuid": "8cff73bf-0000-1000-80b6-e1b5b5a08d0f",
                           "kfd_id": 17592, "node_id": 2, "partition_id": 0}])
    gpu = parse_amd_smi(MI210_STATIC, metric_text(), listing)["gpus"][0]
    assert gpu["pci_bus_id"] == "0000:83:00.0" and gpu["partition"]["id"] == 0
    inventory = parse_amd_smi(MI210_STATIC, metric_text(), "garbage")
    assert inventory["gpus"][0]["pci_bus_id"] is None and "amd-smi list" in inventory["problems"][0]


def test_a_gpu_in_one_document_only_still_gets_a_record():
    doc = rx6600_metric()
    second = copy.deepcopy(doc[0])
    second["gpu"] = 1
    inventory = parse_amd_smi(MI210_STATIC, metric_text(doc + [second]))
    assert [g["index"] for g in inventory["gpus"]] == [0, 1]
    # No static data for GPU 1: no limits, a generic name, never a crash.
    assert inventory["gpus"][1]["temperature"]["slowdown_c"] is None and inventory["gpus"][1]["name"].startswith("AMD GPU")


@pytest.mark.parametrize("raw, expected", [
    ("6.10.5", ("6.10.5", "dkms", None)),
    ("Linuxversion6.14.0-24-generic(buildd@lcy02-amd64-010)(x86_64-linux-gnu-gcc-13", (None, "in-box", "6.14.0-24-generic")),
    ("7.0.0-3-pve", (None, "in-box", "7.0.0-3-pve")),
    ("N/A", (None, None, None)),
])
def test_driver_identity(raw, expected):
    assert amd_smi.driver_identity(raw) == expected


def test_a_lone_gpu_object_and_a_listed_ecc_block_state_read_too():
    static = json.loads(MI210_STATIC)["gpu_data"][0]
    static["ras"]["ecc_block_state"] = [{"block": "UMC", "status": "ENABLED"}, {"block": "XGMI_WAFL", "status": "DISABLED"}]
    gpu = parse_amd_smi(json.dumps(static), with_ecc(uncorrectable=1, umc_uncorrectable=1))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 1 and gpu["ras_blocks"]["XGMI_WAFL"]["enabled"] is False


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


def test_the_rx6600_static_and_metric_pair():
    inventory = parse_amd_smi(json.dumps(rx6600_static()), metric_text())
    assert (inventory["driver_version"], inventory["driver_kind"], inventory["kernel_release"]) == (None, "in-box", "7.0.0-3-pve")
    (gpu,) = inventory["gpus"]
    assert gpu["pci_bus_id"] == "0000:0b:00.0" and gpu["name"] == "Navi 23 [Radeon RX 6600/6600 XT"
    assert gpu["vbios_version"] == "020.003.000.030.000000"
    assert (gpu["temperature"]["slowdown_c"], gpu["temperature"]["shutdown_c"], gpu["temperature"]["memory_max_c"]) == (110, 115, 100)
    assert gpu["power"] == {"draw_w": 6, "limit_w": 100, "default_limit_w": None, "min_limit_w": 94, "max_limit_w": 100}
    # No RAS on a Radeon: ECC not judged; partitions "N/A": absent.
    assert gpu["ecc"]["current"] is None and gpu["ecc"]["volatile"]["uncorrectable"] is None
    assert gpu["partition"] == {"compute": None, "memory": None, "id": None} and gpu["unreadable"] == {}


def test_newer_limit_spellings_ppt0_and_mem_temperatures():
    static = rx6600_static()
    limit = static[0]["limit"]
    for kind in ("slowdown", "shutdown"):
        limit["%s_mem_temperature" % kind] = limit.pop("%s_vram_temperature" % kind)
    limit["ppt0"] = {"socket_power_limit": {"value": 750, "unit": "W"}, "max_power_limit": {"value": 750, "unit": "W"},
                     "min_power_limit": {"value": 0, "unit": "W"}}
    for key in ("max_power", "min_power", "socket_power"):
        del limit[key]
    gpu = parse_amd_smi(json.dumps(static), metric_text())["gpus"][0]
    assert gpu["temperature"]["memory_max_c"] == 100
    assert (gpu["power"]["limit_w"], gpu["power"]["max_limit_w"], gpu["power"]["min_limit_w"]) == (750, 750, 0)
