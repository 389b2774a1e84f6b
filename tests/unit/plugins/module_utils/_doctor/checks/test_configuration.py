"""The GPU configuration checks (persistence, ECC and MIG modes) on recorded nvidia-smi output, modes planted
by editing copies of the recordings."""

from ansible_collections.continuum.hydra.tests.support.nvidia import A100_UUID, judge, named, smi


def test_persistence_off_warns_unless_intended():
    record = judge("gpu.persistence_mode", smi("a100-sxm4-v12.xml"))
    assert record["status"] == "WARN" and "nvidia-persistenced" in record["remediation"]
    assert named(record) == [(0, A100_UUID)]
    assert judge("gpu.persistence_mode", smi("a100-sxm4-v12.xml"), {"persistence_mode": "disabled"})["status"] == "PASS"
    assert judge("gpu.persistence_mode", smi("rtx-3060-v12.xml"))["status"] == "PASS"
    bad = judge("gpu.persistence_mode", smi("a100-sxm4-v12.xml"), {"persistence_mode": "off"})
    assert bad["status"] == "ERROR" and "'off' is not one of: enabled, disabled" in bad["message"]


def test_ecc_mode_pending_and_expected():
    pending = judge("gpu.ecc_mode", smi("a100-sxm4-v12.xml", ("ecc_mode/pending_ecc", "Disabled")))
    assert pending["status"] == "WARN" and "reboot/reset needed" in pending["message"]
    off = judge("gpu.ecc_mode", smi("rtx-4000-sff-ada-v13.xml"), {"ecc_mode": "enabled"})
    assert off["status"] == "FAIL" and "ECC disabled, expected enabled" in off["message"]
    assert judge("gpu.ecc_mode", smi("quadro-p2000-v12.xml"), {"ecc_mode": "enabled"})["status"] == "FAIL"
    fixing = judge("gpu.ecc_mode", smi("rtx-4000-sff-ada-v13.xml", ("ecc_mode/pending_ecc", "Enabled")), {"ecc_mode": "enabled"})
    assert fixing["status"] == "WARN"


def test_mig_mode_pending_and_expected():
    pending = judge("gpu.mig", smi("a100-sxm4-v12.xml", ("mig_mode/pending_mig", "Disabled")))
    assert pending["status"] == "WARN" and "reset needed" in pending["message"]
    assert judge("gpu.mig", smi("a100-sxm4-v12.xml"), {"mig_mode": "disabled"})["status"] == "FAIL"
    assert judge("gpu.mig", smi("a100-sxm4-v12.xml"), {"mig_mode": "enabled"})["status"] == "PASS"
    assert judge("gpu.mig", smi("tesla-t4.xml"), {"mig_mode": "enabled"})["status"] == "FAIL"
    assert judge("gpu.mig", smi("tesla-t4.xml"))["status"] == "SKIP"
