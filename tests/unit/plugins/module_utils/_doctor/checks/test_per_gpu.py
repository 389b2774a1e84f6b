"""The GPU check family as a whole on recorded nvidia-smi output: healthy recordings, documented rules, the real
probes replaying a recording."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path
from ansible_collections.continuum.hydra.tests.support.nvidia import A100_UUID, GPU_CHECKS, RECORDINGS, fake_nvidia_smi, judge, smi


@pytest.mark.parametrize("name", RECORDINGS)
def test_healthy_idle_recordings_give_no_fail_and_no_error(name):
    data = smi(name)
    for chk in GPU_CHECKS:
        record = judge(chk.id, data)
        assert record["status"] not in ("FAIL", "ERROR"), (chk.id, record["message"])
        assert record["message"] and "\n" not in record["message"]
        if record["status"] in ("WARN", "FAIL", "ERROR"):
            assert record["remediation"], chk.id


def test_healthy_recordings_warn_only_where_the_hardware_says_so():
    warned = dict((name, set(c.id for c in GPU_CHECKS if judge(c.id, smi(name))["status"] == "WARN"))
                  for name in RECORDINGS)
    nvml = "gpu.nvml_available"  # nvidia-smi works but NVML does not initialise in these envelopes
    assert warned == {
        "a100-sxm4-v12.xml": {"gpu.persistence_mode", nvml},
        "a10g.xml": {"gpu.pcie_link", "gpu.persistence_mode", nvml},
        "quadro-p2000-v12.xml": {"gpu.pcie_link", nvml},
        "rtx-3060-v12.xml": {nvml},
        "rtx-3080-v13.xml": {"gpu.persistence_mode", nvml},
        "rtx-4000-sff-ada-v13.xml": {nvml},
        "tesla-t4.xml": {"gpu.pcie_link", "gpu.persistence_mode", nvml},
    }


def test_every_gpu_check_documents_its_rule_and_remediation():
    for chk in GPU_CHECKS:
        assert chk.rule.startswith("Reads "), chk.id
        assert "Remediation:" in chk.rule, chk.id


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="reads this host's PCI bus and kernel log: needs a host without GPU")
def test_a_replayed_recording_runs_every_gpu_check_through_the_real_probes(tmp_path):
    path = fake_nvidia_smi(tmp_path, "[ \"$1 $2\" = '-q -x' ] || exit 2\n/bin/cat '%s'"
                           % fixture_path("nvidia-smi", "a100-sxm4-v12.xml"))
    # gpu.topology cross-checks with this machine's /sys, which holds none of the recording's GPUs.
    result = _doctor.run(only=["gpu", "driver", "runtime", "cuda.driver_version"],
                         exclude=["gpu.nvlink", "gpu.nvlink_errors", "gpu.topology"],
                         nvidia_smi_path=path, expect={"gpu_count": 1, "gpu_model": "A100"})
    statuses = dict((c["id"], c["status"]) for c in result["checks"])
    assert "FAIL" not in statuses.values() and "ERROR" not in statuses.values(), result["checks"]
    assert statuses["gpu.count"] == statuses["gpu.model"] == "PASS"
    assert statuses["gpu.persistence_mode"] == "WARN"
    assert result["environment"]["gpus"][0]["uuid"] == A100_UUID
    assert result["probes"]["nvidia_smi"]["status"] == "ok" and result["probes"]["kernel_log"]["status"] == "ok"
