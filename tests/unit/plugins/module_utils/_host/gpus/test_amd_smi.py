"""amd-smi JSON -> GPU records, on recorded amd-smi output (tests/fixtures/amd/README.md) in both shapes."""

import copy
import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import AmdSmiParseError, parse_amd_smi
from ansible_collections.continuum.hydra.tests.support.amd import MI210_STATIC, metric_text, rx6600_metric, rx6600_static, with_ecc


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


def test_zero_ecc_counts_of_a_gpu_without_ras_state_are_not_judged_but_a_reported_error_is_kept():
    static = json.loads(MI210_STATIC)
    static["gpu_data"][0]["ras"] = "N/A"  # Radeon boards: no RAS section
    gpu = parse_amd_smi(json.dumps(static), with_ecc())["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] is None and gpu["ecc"]["current"] is None
    # Issue 23: an uncorrectable count above zero is never dropped, whatever the RAS state reads.
    gpu = parse_amd_smi(json.dumps(static), with_ecc(uncorrectable=4194240))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 4194240 and gpu["ecc"]["current"] == "Unknown"
    gpu = parse_amd_smi(json.dumps(rx6600_static()), with_ecc(deferred=2))["gpus"][0]
    assert gpu["ecc"]["volatile"]["deferred"] == 2 and gpu["ecc"]["current"] == "Unknown"


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
    ("[{\"gpu\": true}]", "is not a number"),
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


def two_rx6600():
    """The RX 6600 static/metric pair as a two-GPU host: a copy of the GPU as GPU 1 at 0000:0c:00.0, edge 50 C."""
    static, metric = rx6600_static(), rx6600_metric()
    static.append(dict(copy.deepcopy(static[0]), gpu=1, bus=dict(static[0]["bus"], bdf="0000:0c:00.0")))
    second = copy.deepcopy(metric[0])
    second.update(gpu=1, temperature=dict(second["temperature"], edge={"value": 50, "unit": "C"}))
    return static, metric + [second]


def readings(inventory):
    return [(g["index"], g["pci_bus_id"], g["temperature"]["edge_c"]) for g in inventory["gpus"]]


def test_documents_listing_gpus_in_other_orders_are_matched_by_address_and_index():
    static, metric = two_rx6600()
    listing = [{"gpu": 1, "bdf": "0000:0c:00.0", "uuid": "u1"}, {"gpu": 0, "bdf": "0000:0b:00.0", "uuid": "u0"}]
    inventory = parse_amd_smi(json.dumps(static[::-1]), metric_text(metric), json.dumps(listing))
    assert readings(inventory) == [(0, "0000:0b:00.0", 36), (1, "0000:0c:00.0", 50)] and inventory["problems"] == []
    assert [g["uuid"] for g in inventory["gpus"]] == ["u0", "u1"]


def test_gpus_named_by_their_pci_address_are_matched_by_it():
    # Issue 23: a document naming each GPU by its address ("gpu": "0000:0c:00.0") was an error for the whole probe.
    static, metric = two_rx6600()
    for item in static:
        item["gpu"] = item["bus"]["bdf"]
    inventory = parse_amd_smi(json.dumps(static), metric_text([dict(metric[1], gpu="0000:0C:00.0"),
                                                               dict(metric[0], gpu="0000:0b:00.0")]))
    assert [(g["pci_bus_id"], g["temperature"]["edge_c"]) for g in inventory["gpus"]] == [
        ("0000:0b:00.0", 36), ("0000:0c:00.0", 50)]


def test_a_list_enumerating_the_gpus_differently_names_each_by_its_address_and_matches_no_metric():
    # Issue 23: list's index 0 is 0c here, static's 0b (a GPU lost or back between the calls). Matched by index,
    # GPU 0 was named 0c with 0b's readings; metric, which names GPUs by index only, cannot be matched at all.
    static, metric = two_rx6600()
    listing = [{"gpu": 0, "bdf": "0000:0c:00.0", "uuid": "u1"}, {"gpu": 1, "bdf": "0000:0b:00.0", "uuid": "u0"}]
    inventory = parse_amd_smi(json.dumps(static), metric_text(metric), json.dumps(listing))
    assert [(g["index"], g["pci_bus_id"], g["uuid"]) for g in inventory["gpus"]] == [
        (0, "0000:0b:00.0", "u0"), (1, "0000:0c:00.0", "u1")]
    assert any("enumerated differently" in problem for problem in inventory["problems"])
    assert all(g["unreadable"]["temperature.gpu_c"].startswith("not in amd-smi metric (the GPUs were enumerated")
               for g in inventory["gpus"])


def test_a_metric_listing_other_indexes_than_static_is_matched_to_none_and_its_errors_are_named():
    # Issue 23: static lists GPUs 0 and 1, metric 1 and 2 (GPU 2 with uncorrectable errors): paired by index, GPU 1
    # got another GPU's readings and GPU 2's errors went to a record whose ECC state nobody knew (not judged).
    static = json.loads(MI210_STATIC)
    static["gpu_data"].append(dict(copy.deepcopy(static["gpu_data"][0]), gpu=1))
    metric = json.loads(with_ecc(uncorrectable=3))
    metric = [dict(copy.deepcopy(metric[0]), gpu=1), dict(metric[0], gpu=2)]
    metric[0]["ecc"]["total_uncorrectable_count"] = 0
    inventory = parse_amd_smi(json.dumps(static), metric_text(metric))
    assert [g["index"] for g in inventory["gpus"]] == [0, 1]
    assert "amd-smi metric GPU 2 matched no GPU and reports 3 uncorrectable ECC errors" in inventory["problems"]
    assert all("ecc.volatile" in g["unreadable"] and g["temperature"]["edge_c"] is None for g in inventory["gpus"])


def test_only_a_metric_still_gives_records():
    inventory = parse_amd_smi("[]", metric_text())
    assert readings(inventory) == [(0, None, 36)]


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
