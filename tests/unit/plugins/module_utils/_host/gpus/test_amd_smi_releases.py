"""amd-smi JSON of each release read right: the recorded outputs (tests/fixtures/amd/README.md) value by value, and
copies of them spelt as older releases spell them.

amd-smi renamed its JSON keys between ROCm releases (tests/support/amd.py rocm60_metric names them and AMD's source);
ROCm 6.0 to 6.1.1 name the clocks `gfx` / `MEM` (6.1: `clk` inside); every release writes `xgmi_err` as the library's
status name (`AMDSMI_XGMI_STATUS_NO_ERRORS`, `..._ERROR`, `..._MULTIPLE_ERRORS`) or "N/A". No recording of those
releases is public: the recorded values are moved to the old keys, nothing else changes.
"""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import parse_amd_smi
from ansible_collections.continuum.hydra.tests.support.amd import (
    MI210_STATIC,
    STRIX_LIST,
    STRIX_STATIC,
    every_leaf_na,
    metric_text,
    rocm60_metric,
    rocm60_static,
    rx6600_metric,
)

STRIX = "Strix Halo [Radeon Graphics / Radeon 8050S Graphics / Radeon 8060S Graphics]"


# ---------------------------------------------------------------- recordings


def test_the_strix_halo_apu_recording_reads_as_written():
    inventory = parse_amd_smi(STRIX_STATIC, "[]", STRIX_LIST)
    (gpu,) = inventory["gpus"]
    assert (inventory["driver_version"], inventory["driver_kind"], inventory["kernel_release"]) == (
        None, "in-box", "6.17.1-300.fc43.x86_64")
    assert (gpu["index"], gpu["pci_bus_id"], gpu["uuid"], gpu["name"], gpu["architecture"]) == (
        0, "0000:c4:00.0", "00ff1586-0000-1000-8000-000000000000", STRIX, "gfx1151")
    assert gpu["vbios_version"] == "023.011.000.039.000001" and gpu["memory"]["total_mib"] == 32768
    assert gpu["partition"] == {"compute": None, "memory": None, "id": 0}
    # Every PCIe maximum, temperature limit and RAS state is "N/A": absent, never a zero, never unreadable.
    assert (gpu["pcie"]["width_max"], gpu["pcie"]["gen_max"]) == (None, None)
    assert (gpu["temperature"]["slowdown_c"], gpu["temperature"]["shutdown_c"], gpu["temperature"]["memory_max_c"]) == (
        None, None, None)
    assert gpu["ecc"]["current"] is None and gpu["bad_pages"]["threshold"] is None


def test_an_apu_reporting_0_w_caps_has_no_power_cap():
    # The APU writes max_power, min_power and socket_power all 0 W: no cap, not a cap of 0 W that a power check or
    # gpu_settings would take for a real one.
    gpu = parse_amd_smi(STRIX_STATIC, "[]", STRIX_LIST)["gpus"][0]
    assert (gpu["power"]["limit_w"], gpu["power"]["max_limit_w"]) == (None, None)


def test_the_mi210_recording_keeps_its_real_caps():
    gpu = parse_amd_smi(MI210_STATIC, metric_text())["gpus"][0]
    assert (gpu["power"]["limit_w"], gpu["power"]["min_limit_w"], gpu["power"]["max_limit_w"]) == (300, 0, 300)


@pytest.mark.parametrize("metric", ["[]", '{"gpu_data": []}'])
def test_a_metric_listing_none_of_the_gpus_leaves_their_readings_unreadable(metric):
    # The GPU was lost between `amd-smi static` and `amd-smi metric`: its readings are unknown, not "N/A".
    gpu = parse_amd_smi(STRIX_STATIC, metric, STRIX_LIST)["gpus"][0]
    assert gpu["unreadable"]["temperature.gpu_c"].startswith("not in amd-smi metric")
    assert gpu["unreadable"]["power.draw_w"].startswith("not in amd-smi metric")


# ---------------------------------------------------------------- ROCm 6.0 / 6.1 spellings


def test_rocm60_metric_and_static_read_like_the_current_release():
    now = parse_amd_smi(MI210_STATIC, metric_text())["gpus"][0]
    gpu = parse_amd_smi(json.dumps(rocm60_static()), json.dumps(rocm60_metric()))["gpus"][0]
    assert gpu["power"]["draw_w"] == now["power"]["draw_w"] == 6
    assert (gpu["pcie"]["width_current"], gpu["pcie"]["gen_current"], gpu["pcie"]["width_max"], gpu["pcie"]["gen_max"]) == (
        8, 4, 16, 4)
    assert gpu["utilization"] == now["utilization"] == {"gpu_pct": 1, "memory_pct": 0}
    assert gpu["clocks"] == now["clocks"] and gpu["max_clocks"] == now["max_clocks"]
    assert (gpu["clocks"]["graphics_mhz"], gpu["max_clocks"]["graphics_mhz"], gpu["clocks"]["memory_mhz"]) == (800, 2750, 541)
    assert gpu["temperature"] == now["temperature"]
    assert (gpu["power"]["limit_w"], gpu["power"]["max_limit_w"]) == (300, 300)
    assert gpu["memory"] == {"total_mib": 8176, "used_mib": 202}
    assert gpu["ecc"]["current"] == "Enabled" and gpu["ecc"]["volatile"]["uncorrectable"] == 0
    assert gpu["ras_blocks"]["UMC"] == {"enabled": True, "correctable": 0, "uncorrectable": 0, "deferred": None}
    assert gpu["xgmi"] == {"error_count": 0, "error_status": "AMDSMI_XGMI_STATUS_NO_ERRORS"} and gpu["unreadable"] == {}


def test_rocm60_static_gives_the_driver_and_vram_under_the_librarys_keys():
    inventory = parse_amd_smi(json.dumps(rocm60_static()), "[]")
    assert (inventory["driver_kind"], inventory["kernel_release"]) == ("in-box", "6.14.0-24-generic")
    assert inventory["gpus"][0]["memory"]["total_mib"] == 65520
    static = rocm60_static()
    static[0]["driver"]["driver_version"] = "6.3.6"
    assert parse_amd_smi(json.dumps(static), "[]")["driver_version"] == "6.3.6"


def test_a_rocm60_uncorrectable_count_is_never_dropped():
    gpu = parse_amd_smi(json.dumps(rocm60_static()), json.dumps(rocm60_metric(uncorrectable=3)))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 3 and gpu["ecc"]["volatile"]["dram_uncorrectable"] == 3
    assert gpu["ras_blocks"]["UMC"]["uncorrectable"] == 3


def test_rocm61_clocks_named_gfx_and_mem_are_read():
    doc = rx6600_metric()
    clock = doc[0]["clock"]
    doc[0]["clock"] = {"gfx": dict(clock["gfx_0"], sleep_clk="N/A"), "MEM": dict(clock["mem_0"], sleep_clk="N/A")}
    gpu = parse_amd_smi(MI210_STATIC, metric_text(doc))["gpus"][0]
    assert (gpu["clocks"]["graphics_mhz"], gpu["max_clocks"]["graphics_mhz"], gpu["clocks"]["memory_mhz"]) == (800, 2750, 541)


@pytest.mark.parametrize("raw, read", [
    ("AMDSMI_XGMI_STATUS_NO_ERRORS", {"error_count": 0, "error_status": "AMDSMI_XGMI_STATUS_NO_ERRORS"}),
    ("AMDSMI_XGMI_STATUS_ERROR", {"error_count": None, "error_status": "AMDSMI_XGMI_STATUS_ERROR"}),
    ("AMDSMI_XGMI_STATUS_MULTIPLE_ERRORS", {"error_count": None, "error_status": "AMDSMI_XGMI_STATUS_MULTIPLE_ERRORS"}),
    ("N/A", {"error_count": None, "error_status": None}),
])
def test_the_xgmi_status_name_is_read_as_a_status_not_as_garbage(raw, read):
    doc = rx6600_metric()
    doc[0]["xgmi_err"] = raw
    gpu = parse_amd_smi(MI210_STATIC, metric_text(doc))["gpus"][0]
    assert gpu["xgmi"] == read and gpu["unreadable"] == {}


def test_an_xgmi_status_name_amd_smi_does_not_have_is_unreadable():
    doc = rx6600_metric()
    doc[0]["xgmi_err"] = "AMDSMI_XGMI_STATUS_SOMETHING_NEW"
    gpu = parse_amd_smi(MI210_STATIC, metric_text(doc))["gpus"][0]
    assert gpu["unreadable"]["xgmi.error_count"] == "AMDSMI_XGMI_STATUS_SOMETHING_NEW"


# ---------------------------------------------------------------- "N/A" where static says a value exists


def test_a_metric_of_only_na_for_a_gpu_with_temperature_limits_and_ecc_is_unreadable():
    dead = [dict(every_leaf_na(rx6600_metric()[0]), gpu=0)]
    gpu = parse_amd_smi(MI210_STATIC, metric_text(dead))["gpus"][0]
    assert "although amd-smi static" in gpu["unreadable"]["temperature.gpu_c"]
    assert "although amd-smi static" in gpu["unreadable"]["ecc.volatile.uncorrectable"]
    # Socket power "N/A" stays absent: a guest VM has none, though static gives its cap.
    assert gpu["power"]["draw_w"] is None and "power.draw_w" not in gpu["unreadable"]


def test_na_ecc_totals_with_ecc_enabled_are_unreadable_but_block_counts_stand_in():
    doc = json.loads(metric_text())
    doc[0]["ecc"] = dict((key, "N/A") for key in doc[0]["ecc"])
    gpu = parse_amd_smi(MI210_STATIC, json.dumps(doc))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] is None and "ecc.volatile.uncorrectable" in gpu["unreadable"]
    doc[0]["ecc_blocks"] = {"UMC": {"correctable_count": 1, "uncorrectable_count": 2, "deferred_count": 0}}
    gpu = parse_amd_smi(MI210_STATIC, json.dumps(doc))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 2 and gpu["unreadable"] == {}


@pytest.mark.parametrize("partition", [
    {"compute_partition": "DPX", "memory_partition": "NPS1", "partition_id": 1},
    {"compute_partition": "CPX", "memory_partition": "NPS1"},  # ROCm 6.0 to 6.2 write no partition_id
])
def test_na_readings_of_a_secondary_partition_stay_absent(partition):
    # Only a GPU's first partition reports its sensors (MI300X in DPX/CPX): "N/A" on the others is by design.
    static = json.loads(MI210_STATIC)
    static["gpu_data"][0]["partition"] = partition
    dead = [dict(every_leaf_na(rx6600_metric()[0]), gpu=0)]
    gpu = parse_amd_smi(json.dumps(static), metric_text(dead))["gpus"][0]
    assert gpu["unreadable"] == {} and gpu["temperature"]["gpu_c"] is None


def test_na_readings_of_a_gpu_in_one_partition_without_an_id_are_unreadable():
    static = json.loads(MI210_STATIC)
    static["gpu_data"][0]["partition"] = {"compute_partition": "SPX", "memory_partition": "NPS1"}
    dead = [dict(every_leaf_na(rx6600_metric()[0]), gpu=0)]
    gpu = parse_amd_smi(json.dumps(static), metric_text(dead))["gpus"][0]
    assert "temperature.gpu_c" in gpu["unreadable"]


def test_a_radeon_with_no_limits_and_na_temperatures_is_absent_not_unreadable():
    static = json.loads(STRIX_STATIC)
    doc = [dict(every_leaf_na(rx6600_metric()[0]), gpu=0)]
    gpu = parse_amd_smi(json.dumps(static), metric_text(doc), STRIX_LIST)["gpus"][0]
    assert gpu["unreadable"] == {}


def test_python_warnings_amd_smi_prints_before_the_json_are_skipped():
    # amd-smi 7.x under Python 3.14 (Bazzite, RX 7800 XT; nathaninline/ajean#39) prints these two warnings, verbatim,
    # before the {"gpu_data": [...]} document when stderr and stdout are read together.
    noise = ("/usr/lib/python3.14/site-packages/amdsmi/amdsmi_interface.py:3569: SyntaxWarning: 'return' in a "
             "'finally' block\n  return return_dictionary\n"
             "/usr/lib/python3.14/site-packages/amdsmi/amdsmi_interface.py:3603: SyntaxWarning: 'return' in a "
             "'finally' block\n  return return_dictionary\n")
    gpu = parse_amd_smi(noise + MI210_STATIC, noise + metric_text(wrapped=True))["gpus"][0]
    assert (gpu["name"], gpu["temperature"]["hotspot_c"], gpu["power"]["draw_w"]) == ("AMD Instinct MI210", 37, 6)
