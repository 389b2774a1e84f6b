"""rocm-smi --showallinfo --json -> GPU records, on every recorded rocm-smi output (tests/fixtures/amd/README.md)."""

import json
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import AmdSmiParseError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.rocm_smi import parse_rocm_smi
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

RECORDINGS = sorted(os.listdir(fixture_path("amd", "rocm-smi")))


@pytest.mark.parametrize("name", RECORDINGS)
def test_every_recording_reads_without_unreadable_values(name):
    inventory = parse_rocm_smi(read_fixture("amd", "rocm-smi", name))
    assert inventory["vendor"] == "amd" and inventory["source"] == "rocm-smi" and inventory["gpus"]
    for gpu in inventory["gpus"]:
        assert gpu["unreadable"] == {}, (name, gpu["unreadable"])
        assert gpu["name"] and gpu["pci_bus_id"] and gpu["temperature"]["gpu_c"] is not None
        assert gpu["power"]["limit_w"] and gpu["pcie"]["width_current"] in (8, 16)
    json.dumps(inventory, allow_nan=False)


@pytest.mark.parametrize("name, count, model, driver", [
    ("telegraf-mi100_rocm571.json", 6, "Arcturus GL-XL [Instinct MI100]", "6.2.4"),
    ("telegraf-mi100_rocm602.json", 4, "Arcturus GL-XL [Instinct MI100]", "6.3.6"),
    ("telegraf-vega-20-WKS-GL-XE.json", 1, "Radeon Instinct MI50 32GB", "5.9.17"),
    ("wandb-mi250-oam-gcd-drv624-rocm6.json", 1, "AMD INSTINCT MI250 (MCM) OAM AC MBA", "6.2.4"),
    # ROCm 4.3 printed "0x1002" where the name belongs: the device id names it instead.
    ("telegraf-rx6700xt_rocm430.json", 1, "AMD GPU 0x73df", "6.3.6"),
    ("telegraf-rx6700xt_rocm612.json", 1, "Navi 22 [Radeon RX 6700/6700 XT / 6800M]", "6.3.6"),
])
def test_counts_models_and_driver_versions_across_key_renames(name, count, model, driver):
    inventory = parse_rocm_smi(read_fixture("amd", "rocm-smi", name))
    assert len(inventory["gpus"]) == count and inventory["gpus"][0]["name"] == model
    assert (inventory["driver_version"], inventory["driver_kind"]) == (driver, "dkms")


def test_mi250_die_fields():
    (gpu,) = parse_rocm_smi(read_fixture("amd", "rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json"))["gpus"]
    assert gpu["pci_bus_id"] == "0000:29:00.0" and gpu["architecture"] == "gfx9010"
    # Junction (hotspot) is the judged sensor; the idle link level is a DPM state, kept as read.
    assert (gpu["temperature"]["sensor"], gpu["temperature"]["gpu_c"], gpu["temperature"]["edge_c"]) == ("hotspot", 44.0, 43.0)
    assert (gpu["pcie"]["gen_current"], gpu["pcie"]["width_current"], gpu["pcie"]["replay_counter"]) == (1, 8, 3824)
    assert (gpu["power"]["draw_w"], gpu["power"]["limit_w"]) == (91.0, 560.0)
    assert (gpu["clocks"]["sm_mhz"], gpu["max_clocks"]["sm_mhz"]) == (800, 1700)
    # rocm-smi JSON has neither ECC counts nor temperature limits: None, not 0.
    assert gpu["ecc"]["volatile"]["uncorrectable"] is None and gpu["temperature"]["slowdown_c"] is None


def test_secondary_die_power_and_a_degraded_card_are_absent_not_zero():
    doc = json.loads(read_fixture("amd", "rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json"))
    doc["card0"]["Average Graphics Package Power (W)"] = "N/A (Secondary die)"
    doc["card1"] = {"Device ID": "0x73ff", "PCI Bus": "0000:03:00.0", "Performance Level": "unknown"}
    first, second = parse_rocm_smi(json.dumps(doc))["gpus"]
    assert first["power"]["draw_w"] is None and first["unreadable"] == {}
    assert second["temperature"]["gpu_c"] is None and second["power"]["limit_w"] is None and second["unreadable"] == {}


def test_a_secondary_die_s_0_w_cap_is_no_cap():
    # rocm-smi shows an MI250's second die with no power reading and a 0.0 W cap (wandb/wandb#5449's concise table:
    # "N/A ... 0.0W"): no cap, not a cap of 0 W, as amd-smi's 0 W caps of an APU.
    doc = json.loads(read_fixture("amd", "rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json"))
    doc["card0"].update({"Average Graphics Package Power (W)": "N/A (Secondary die)", "Max Graphics Package Power (W)": "0.0"})
    (gpu,) = parse_rocm_smi(json.dumps(doc))["gpus"]
    assert (gpu["power"]["draw_w"], gpu["power"]["limit_w"]) == (None, None) and gpu["unreadable"] == {}


@pytest.mark.parametrize("level, gen", [("0 (2.5GT/s x8)", 1), ("1 (16.0GT/s x16)", 4), ("2 (64.0GT/s x16)", 6),
                                        ("3 (128.0GT/s x16)", 7), ("1 (3.0GT/s x16)", None)])
def test_link_level_generation_from_the_one_pcie_table(level, gen):
    # Edited copies of the recorded MI250 link level; Gen 7 (128 GT/s, PCIe 7.0) read as None before the shared table.
    doc = json.loads(read_fixture("amd", "rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json"))
    doc["card0"]["pcie clock level"] = level
    assert parse_rocm_smi(json.dumps(doc))["gpus"][0]["pcie"]["gen_current"] == gen


def test_mi300_socket_power_key():
    doc = json.loads(read_fixture("amd", "rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json"))
    del doc["card0"]["Average Graphics Package Power (W)"]
    doc["card0"]["Current Socket Graphics Package Power (W)"] = "133.0"
    assert parse_rocm_smi(json.dumps(doc))["gpus"][0]["power"]["draw_w"] == 133.0


@pytest.mark.parametrize("text, words", [
    ("WARNING: No JSON data to report", "no JSON"),
    ("[1, 2]", "expected an object of cardN entries"),
    ('{"card0": "broken"}', "card0 is str"),
    ('{"foo": {}}', "no cardN entry"),
])
def test_bad_output_is_one_clear_error(text, words):
    with pytest.raises(AmdSmiParseError, match=words):
        parse_rocm_smi(text)
