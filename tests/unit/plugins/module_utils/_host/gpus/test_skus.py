"""The SKU table: a source for every figure, product names matched, PCIe link rates."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import skus


def test_sku_table_has_a_source_for_every_figure():
    for sku in skus.SKUS:
        for key, value in sku.items():
            if key.endswith(("_peak", "_measured", "_tbps", "_gbps_measured", "_busbw_gbps")) and value is not None:
                assert sku["sources"].get(key), "%s.%s has no source" % (sku["id"], key)


@pytest.mark.parametrize("name, sku_id", [("NVIDIA H100 80GB HBM3", "h100_sxm"), ("NVIDIA H100 PCIe", "h100_pcie"),
                                          ("NVIDIA GH200 480GB", "gh200"), ("NVIDIA H200", "h200"),
                                          ("NVIDIA A100-SXM4-80GB", "a100_sxm"), ("NVIDIA A100 80GB PCIe", "a100_pcie"),
                                          ("Tesla V100-SXM2-32GB", "v100"), ("NVIDIA GeForce RTX 4090", None), (None, None)])
def test_product_names_find_their_sku(name, sku_id):
    assert (skus.find_sku(name) or {}).get("id") == sku_id


def test_explicit_sku_and_link_rates():
    assert skus.find_sku("anything", "l40s")["label"] == "L40S"
    assert skus.find_sku("NVIDIA H100 80GB HBM3", "nope") is None
    assert skus.link_rate_gbps(4, 16) == pytest.approx(31.5, abs=0.01)
    assert skus.link_rate_gbps(5, 8) == pytest.approx(31.5, abs=0.01)
    assert skus.link_rate_gbps(None, 16) is None and skus.link_rate_gbps(7, 16) is None


def test_nvlink_skus_have_an_allreduce_figure_and_pcie_skus_do_not():
    figures = dict((sku["id"], sku.get("allreduce_busbw_gbps")) for sku in skus.SKUS)
    assert figures["h100_sxm"] == figures["h200"] == 370.0 and figures["a100_sxm"] == 200.0
    assert figures["h100_pcie"] is None and figures["a100_pcie"] is None


@pytest.mark.parametrize("name, sku_id", [
    ("AMD Instinct MI300X", "mi300x"), ("AMD Instinct MI300X VF", "mi300x"), ("AMD Instinct MI325X", "mi325x"),
    ("AMD Instinct MI210", "mi210"), ("AMD INSTINCT MI250 (MCM) OAM AC MBA", "mi250"), ("AMD Instinct MI250X", "mi250x"),
    ("AMD Instinct MI300A", None), ("AMD Instinct MI100", None)])
def test_amd_product_names_find_their_sku(name, sku_id):
    assert (skus.find_sku(name) or {}).get("id") == sku_id


def test_amd_entries_carry_the_datasheet_peaks_and_a_url():
    by_id = dict((sku["id"], sku) for sku in skus.SKUS)
    assert by_id["mi300x"]["bf16_tflops_peak"] == by_id["mi325x"]["bf16_tflops_peak"] == 1307.4
    assert (by_id["mi300x"]["memory_bandwidth_tbps"], by_id["mi325x"]["memory_bandwidth_tbps"]) == (5.3, 6.0)
    assert by_id["mi210"]["bf16_tflops_peak"] == 181.0 and by_id["mi210"]["memory_bandwidth_tbps"] == 1.6
    # An MI250X module's 383 TFLOPS and 3.2 TB/s are two GCDs, each a device of its own: one GCD is judged.
    assert by_id["mi250x"]["bf16_tflops_peak"] * 2 == pytest.approx(383.0)
    assert by_id["mi250x"]["memory_bandwidth_tbps"] * 2 == pytest.approx(3.2)
    for sku_id in ("mi210", "mi250", "mi250x", "mi300x", "mi325x"):
        assert by_id[sku_id]["vendor"] == "amd"
        assert all("https://" in source for source in by_id[sku_id]["sources"].values()), sku_id


def test_recorded_amd_names_find_their_sku():
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import rocm_smi
    from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

    inventory = rocm_smi.parse_rocm_smi(read_fixture("amd", "rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json"))
    assert set(skus.find_sku(gpu["name"])["id"] for gpu in inventory["gpus"]) == {"mi250"}
