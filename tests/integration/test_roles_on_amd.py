"""The NVIDIA-only roles (gpu_settings, mig) on a host whose GPUs are AMD: a fake amd-smi on PATH, no nvidia-smi.

Each role must report skipped with the reason and change nothing; a fake nvidia-smi placed beside it proves the
skip is about the vendor (that host is judged as before).
"""

import os

import pytest

from ansible_collections.continuum.hydra.tests.support.role_run import run_role

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.path.exists("/usr/bin/nvidia-smi") or os.path.exists("/bin/nvidia-smi"),
                                 reason="needs a host whose /usr/bin has no nvidia-smi")]


def amd_host(tmp_path):
    """A bin directory with an amd-smi that logs its calls (none are expected) and no nvidia-smi."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "amd-smi.calls"
    script = bindir / "amd-smi"
    script.write_text('#!/bin/sh\necho "$*" >> "%s"\nexit 0\n' % log)
    script.chmod(0o755)
    return str(bindir), log


@pytest.mark.parametrize("role, role_vars, result_var, words", [
    ("gpu_settings", {"gpu_settings_power_limit": 300, "gpu_settings_persistence_mode": True}, "gpu_settings_result",
     "amd-smi set --gpu <index> --power-cap <watts>"),
    ("mig", {"mig_mode": "enabled", "mig_confirm": True}, "mig_result", "MIG is NVIDIA-only"),
])
def test_nvidia_only_role_skips_on_an_amd_host_with_the_reason(tmp_path, role, role_vars, result_var, words):
    bindir, log = amd_host(tmp_path)
    run = run_role(tmp_path, role, dict(role_vars, **{"%s_timeout" % role: 30}), result_var,
                   env={"PATH": "%s:/usr/bin:/bin" % bindir})
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 0
    assert run.result["skipped"] is True and run.result["changed"] is False
    reason = run.result["skip_reason"]
    assert reason.startswith("no nvidia-smi on this host and its GPUs are AMD (amd-smi on PATH)"), reason
    assert words in reason
    assert reason in run.output  # the role says it, not only the registered result
    assert not os.path.exists(str(log)), "the role ran amd-smi"


def test_without_any_gpu_tool_the_role_still_fails_on_the_missing_nvidia_smi(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    if os.path.isdir("/sys/module/amdgpu"):
        pytest.skip("this machine has the amdgpu module loaded")
    run = run_role(tmp_path, "gpu_settings", {"gpu_settings_power_limit": 300}, "gpu_settings_result",
                   env={"PATH": "%s:/usr/bin:/bin" % bindir})
    assert run.rc != 0 and "nvidia-smi: not found" in run.output, run.output[-3000:]
