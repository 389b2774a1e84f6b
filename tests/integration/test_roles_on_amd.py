"""The NVIDIA-only roles (gpu_settings, mig) on a host whose GPUs are AMD: a fake amd-smi on PATH, no nvidia-smi.

Each role must report skipped with the reason and change nothing; a fake nvidia-smi placed beside it proves the
skip is about the vendor (that host is judged as before). The one exception is gpu_settings' power_limit, set on
AMD GPUs with amd-smi: a stateful fake amd-smi (tests/utils/fake_amd_smi_state.py) replays a recorded MI210
`amd-smi static --json` (cap 300 W, range 0-300 W) with the cap editable.
"""

import os
import subprocess
import sys

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.role_run import read_state, run_role

FAKE_AMD_SMI = os.path.join(REPO, "tests", "utils", "fake_amd_smi_state.py")
MI210_STATIC = os.path.join(REPO, "tests", "fixtures", "amd", "amd-smi", "dme-mi210-static-inbox-driver.json")

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
    ("gpu_settings", {"gpu_settings_persistence_mode": True, "gpu_settings_compute_mode": "EXCLUSIVE_PROCESS"},
     "gpu_settings_result", "amd-smi set --gpu <index> --power-cap <watts>"),
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
    assert reason.startswith("no nvidia-smi on this host and its GPUs are AMD (amd-smi at %s/" % tmp_path), reason
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


# ---- the power cap on AMD GPUs: applied with amd-smi ------------------------------------------------------------

def amd_smi_host(tmp_path, drop_sets=False):
    """A bin directory with a stateful fake amd-smi (seeded from the MI210 recording) and no nvidia-smi."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    state = str(tmp_path / "amd-smi-state.json")
    subprocess.run([sys.executable, FAKE_AMD_SMI, "seed", MI210_STATIC, state], check=True)
    wrapper = bindir / "amd-smi"
    wrapper.write_text('#!/bin/sh\n%sHYDRA_FAKE_AMD_SMI_STATE="%s" exec "%s" "%s" "$@"\n' % (
        "HYDRA_FAKE_AMD_SMI_DROP_SETS=1 " if drop_sets else "", state, sys.executable, FAKE_AMD_SMI))
    wrapper.chmod(0o755)
    return {"PATH": "%s:/usr/bin:/bin" % bindir}, state


def cap_of(state_path):
    gpu = read_state(state_path)["static"]["gpu_data"][0]
    return gpu["limit"]["socket_power"]["value"]


def set_calls(state_path):
    return [c for c in read_state(state_path)["calls"] if c[:1] == ["set"]]


def cap_run(tmp_path, env, check=False, **role_vars):
    return run_role(tmp_path, "gpu_settings", dict(role_vars, gpu_settings_timeout=30), "gpu_settings_result",
                    check=check, env=env)


def test_power_cap_is_applied_with_amd_smi_read_back_and_idempotent(tmp_path):
    env, state = amd_smi_host(tmp_path)
    assert cap_of(state) == 300
    run = cap_run(tmp_path, env, gpu_settings_power_limit=250)
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 1
    assert run.result["changed"] is True and run.result["vendor"] == "amd"
    assert [(c["setting"], c["before"], c["after"]) for c in run.result["changes"]] == [("power_limit", 300.0, 250.0)]
    assert set_calls(state) == [["set", "--gpu", "0", "--power-cap", "250"]]
    assert cap_of(state) == 250
    assert run.result["gpus"] == {"gpu0": {"power_limit": 250.0}}  # what was read back
    assert run.result["skipped_settings"] == [] and "skip_reason" not in run.result

    again = cap_run(tmp_path, env, gpu_settings_power_limit=250)
    assert again.rc == 0, again.output[-4000:]
    assert again.changed == 0 and again.result["changes"] == []
    assert len(set_calls(state)) == 1


def test_power_cap_check_mode_predicts_and_writes_nothing(tmp_path):
    env, state = amd_smi_host(tmp_path)
    run = cap_run(tmp_path, env, check=True, gpu_settings_power_limit=200)
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 1 and run.result["changed"] is True
    assert run.result["diff"] == {"before": {"gpu0": {"power_limit": 300.0}}, "after": {"gpu0": {"power_limit": 200.0}}}
    assert set_calls(state) == [] and cap_of(state) == 300


def test_power_cap_with_nvidia_only_settings_sets_the_cap_and_names_what_was_skipped(tmp_path):
    env, state = amd_smi_host(tmp_path)
    run = cap_run(tmp_path, env, gpu_settings_power_limit=250, gpu_settings_persistence_mode=True)
    assert run.rc == 0, run.output[-4000:]
    assert cap_of(state) == 250 and run.result["skipped_settings"] == ["persistence_mode"]
    assert run.result["skip_reason"].startswith("persistence_mode not set: no nvidia-smi on this host and its GPUs are AMD")
    assert run.result["skip_reason"] in run.output  # the role says it


@pytest.mark.parametrize("cap, message", [
    (400, "power_limit: 400 W is outside GPU 0's range 0-300 W"),
    (250.5, "power_limit: 250.5 W is not whole watts; amd-smi --power-cap takes whole watts"),
])
def test_bad_power_cap_fails_with_one_line_and_changes_nothing(tmp_path, cap, message):
    env, state = amd_smi_host(tmp_path)
    run = cap_run(tmp_path, env, gpu_settings_power_limit=cap)
    assert run.rc != 0
    assert message in run.output, run.output[-3000:]
    assert "Traceback" not in run.output
    assert set_calls(state) == [] and cap_of(state) == 300


def test_power_cap_that_does_not_take_fails_verification(tmp_path):
    env, state = amd_smi_host(tmp_path, drop_sets=True)
    run = cap_run(tmp_path, env, gpu_settings_power_limit=250)
    assert run.rc != 0
    assert "gpu_settings: changes not verified: GPU 0 power_limit reads 300.0" in run.output, run.output[-3000:]
    assert set_calls(state) == [["set", "--gpu", "0", "--power-cap", "250"]]
