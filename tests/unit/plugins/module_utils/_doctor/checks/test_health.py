"""The GPU memory health checks (ECC errors, row remapping, retired pages) on recorded nvidia-smi output, faults
planted by editing copies of the recordings."""

from ansible_collections.continuum.hydra.tests.support.nvidia import A100_UUID, judge, named, smi


def test_uncorrectable_ecc_fails_naming_the_gpu():
    record = judge("gpu.ecc_errors", smi("a100-sxm4-v12.xml", ("ecc_errors/volatile/dram_uncorrectable", "2")))
    assert record["status"] == "FAIL"
    assert named(record) == [(0, A100_UUID)]
    assert "volatile DRAM 2" in record["message"] and record["remediation"]


def test_a_lifetime_only_uncorrectable_count_warns_and_does_not_drain_forever():
    # aggregate counts survive reboots: failing on them would keep a repaired GPU failed for ever.
    aggregate_sram = judge("gpu.ecc_errors", smi("tesla-t4.xml", ("ecc_errors/aggregate/sram_uncorrectable", "1")))
    assert aggregate_sram["status"] == "WARN" and "lifetime count only (aggregate SRAM 1)" in aggregate_sram["message"]
    assert "nvidia-smi -p 1" in aggregate_sram["remediation"]
    both = judge("gpu.ecc_errors", smi("tesla-t4.xml", ("ecc_errors/aggregate/sram_uncorrectable", "1"),
                                       ("ecc_errors/volatile/sram_uncorrectable", "1")))
    assert both["status"] == "FAIL" and "volatile SRAM 1" in both["message"]


def test_correctable_ecc_over_the_threshold_warns():
    data = smi("tesla-t4.xml", ("ecc_errors/volatile/dram_correctable", "150"))
    assert judge("gpu.ecc_errors", data)["status"] == "WARN"
    assert judge("gpu.ecc_errors", data, {"ecc_correctable_warn": 200})["status"] == "PASS"


def test_pending_row_remap_warns_reset_needed_and_failure_fails():
    pending = judge("gpu.row_remap", smi("a10g.xml", ("remapped_rows/remapped_row_pending", "Yes")))
    assert pending["status"] == "WARN" and "reset needed" in pending["message"]
    assert named(pending) == [(0, "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94")]
    failed = judge("gpu.row_remap", smi("a10g.xml", ("remapped_rows/remapped_row_failure", "Yes")))
    assert failed["status"] == "FAIL"
    many = judge("gpu.row_remap", smi("a10g.xml", ("remapped_rows/remapped_row_unc", "600")))
    assert many["status"] == "WARN" and "600 rows remapped" in many["message"]
    exhausted = judge("gpu.row_remap", smi("rtx-4000-sff-ada-v13.xml",
                                           ("remapped_rows/row_remapper_histogram/row_remapper_histogram_none", "2 bank(s)")))
    assert exhausted["status"] == "WARN" and "no spare row" in exhausted["message"]


def test_pre_ampere_retired_pages():
    pending = judge("gpu.row_remap", smi("tesla-t4.xml", ("retired_pages/pending_retirement", "Yes")))
    assert pending["status"] == "WARN" and "retirement pending" in pending["message"]
    dbe = judge("gpu.row_remap", smi("tesla-t4.xml", ("retired_pages/double_bit_retirement/retired_count", "15")))
    assert dbe["status"] == "FAIL" and "15 for double-bit" in dbe["message"]
    assert judge("gpu.row_remap", smi("tesla-t4.xml", ("retired_pages/double_bit_retirement/retired_count", "15")),
                 {"retired_pages_dbe_fail": 20})["status"] == "PASS"
    assert judge("gpu.row_remap", smi("a100-sxm4-v12.xml"))["message"].endswith("(not reported while MIG is enabled)")
