"""The continuum.hydra.gpu_settings role against a stateful fake nvidia-smi seeded from a real A100 recording.

Check mode, diff, idempotence and verification are asserted on the fake's state file and its call log.
"""

import json
import re

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path
from ansible_collections.continuum.hydra.tests.support.role_run import fake_smi, read_state, run_role, setting_calls

pytestmark = pytest.mark.integration


@pytest.fixture
def smi(tmp_path):
    return fake_smi(tmp_path, fixture_path("nvidia-smi", "a100-sxm4-v12.xml"), gpus=2)


def apply(tmp_path, smi, check=False, env=None, **settings):
    role_vars = {"gpu_settings_nvidia_smi_path": smi[0],
                 "gpu_settings_locked_clocks_record": str(tmp_path / "locked-clocks.json")}
    role_vars.update(("gpu_settings_%s" % k, v) for k, v in settings.items())
    return run_role(tmp_path, "gpu_settings", role_vars, "gpu_settings_result", check=check, env=env)


def settings_of(state_path, key):
    return [gpu[key] for gpu in read_state(state_path)["gpus"]]


WANT = {"persistence_mode": True, "power_limit": 400, "compute_mode": "EXCLUSIVE_PROCESS",
        "application_clocks": {"memory": 1593, "graphics": 1410}}


def test_check_mode_lists_changes_shows_diff_and_runs_no_setting_command(tmp_path, smi):
    run = apply(tmp_path, smi, check=True, **WANT)
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 1
    assert settings_of(smi[1], "persistence_mode") == ["Disabled", "Disabled"]
    assert settings_of(smi[1], "power_limit") == [500.0, 500.0]
    assert setting_calls(read_state(smi[1])) == []
    # 4 settings differ on each of the 2 GPUs.
    assert sorted((c["index"], c["setting"]) for c in run.result["changes"]) == sorted(
        (i, s) for i in (0, 1) for s in ("persistence_mode", "power_limit", "compute_mode", "application_clocks"))
    assert re.search(r'^-\s+"persistence_mode": "Disabled",$', run.output, re.M)
    assert re.search(r'^\+\s+"persistence_mode": "Enabled",$', run.output, re.M)


def test_applies_only_what_differs_verifies_and_is_idempotent(tmp_path, smi):
    run = apply(tmp_path, smi, **WANT)
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 1
    assert settings_of(smi[1], "persistence_mode") == ["Enabled", "Enabled"]
    assert settings_of(smi[1], "power_limit") == [400.0, 400.0]
    assert settings_of(smi[1], "compute_mode") == ["Exclusive_Process", "Exclusive_Process"]
    assert settings_of(smi[1], "application_clocks") == [{"memory": 1593, "graphics": 1410}] * 2
    assert sorted(setting_calls(read_state(smi[1]))) == sorted(
        [["-i", i, "-pm", "1"] for i in "01"] + [["-i", i, "-pl", "400"] for i in "01"]
        + [["-i", i, "-c", "3"] for i in "01"] + [["-i", i, "-ac", "1593,1410"] for i in "01"])
    assert run.result["gpus"]["gpu1"]["power_limit"] == 400.0

    calls = len(read_state(smi[1])["calls"])
    again = apply(tmp_path, smi, **WANT)
    assert again.rc == 0, again.output[-4000:]
    assert again.changed == 0
    assert again.result["changes"] == []
    assert setting_calls(read_state(smi[1]), since=calls) == []

    # One setting changed by hand is the only thing set back.
    state = read_state(smi[1])
    state["gpus"][1]["persistence_mode"] = "Disabled"
    with open(smi[1], "w") as handle:
        json.dump(state, handle)
    calls = len(state["calls"])
    third = apply(tmp_path, smi, **WANT)
    assert third.changed == 1
    assert setting_calls(read_state(smi[1]), since=calls) == [["-i", "1", "-pm", "1"]]


def test_selected_gpus_only(tmp_path, smi):
    run = apply(tmp_path, smi, gpus=["GPU-513536b6-7d19-9063-b049-1e69664bb201"], persistence_mode=True)
    assert run.rc == 0, run.output[-4000:]
    assert settings_of(smi[1], "persistence_mode") == ["Disabled", "Enabled"]


def test_ecc_change_says_reset_or_reboot_required_while_pending(tmp_path, smi):
    run = apply(tmp_path, smi, ecc_mode=False)
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 1
    assert settings_of(smi[1], "ecc_mode_pending") == ["Disabled", "Disabled"]
    assert settings_of(smi[1], "ecc_mode_current") == ["Enabled", "Enabled"]
    assert run.result["reboot_required"] is True and run.result["reboot_required_gpus"] == [0, 1]
    assert "ECC mode pending on GPU(s) 0, 1: reset / reboot required" in run.output
    # Nothing more to set, but the reboot is still pending and still said.
    again = apply(tmp_path, smi, ecc_mode=False)
    assert again.changed == 0
    assert "reset / reboot required" in again.output


def test_locked_clocks_are_recorded_and_not_set_twice(tmp_path, smi):
    run = apply(tmp_path, smi, locked_clocks={"min": 1200, "max": 1410})
    assert run.rc == 0, run.output[-4000:]
    assert settings_of(smi[1], "locked_clocks") == [{"min": 1200, "max": 1410}] * 2
    calls = len(read_state(smi[1])["calls"])
    again = apply(tmp_path, smi, locked_clocks={"min": 1200, "max": 1410})
    assert again.changed == 0
    assert setting_calls(read_state(smi[1]), since=calls) == []


def test_a_change_that_does_not_take_fails_verification(tmp_path, smi):
    run = apply(tmp_path, smi, env={"HYDRA_FAKE_SMI_DROP_SETS": "1"}, persistence_mode=True)
    assert run.rc != 0
    assert "gpu_settings: changes not verified: GPU 0 persistence_mode reads 'Disabled'" in run.output


@pytest.mark.parametrize("settings, message", [
    ({"power_limit": 900}, "power_limit: 900 W is outside GPU 0's range 100-500 W"),
    ({"gpus": ["7"], "persistence_mode": True}, "gpus: '7' matches no GPU; this host has 0 (GPU-"),
    ({"locked_clocks": {"min": 1410, "max": 1200}}, "locked_clocks: min 1410 MHz is above max 1200 MHz"),
    ({"compute_mode": "SHARED"}, "compute_mode"),
])
def test_bad_input_fails_with_one_line_and_changes_nothing(tmp_path, smi, settings, message):
    run = apply(tmp_path, smi, **settings)
    assert run.rc != 0
    assert message in run.output
    assert "Traceback" not in run.output
    assert setting_calls(read_state(smi[1])) == []
