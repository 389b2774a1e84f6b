"""The continuum.hydra.mig role against a stateful fake nvidia-smi seeded from a real A100 recording (MIG on)."""

import json

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path
from ansible_collections.continuum.hydra.tests.support.role_run import fake_smi, read_state, run_role, setting_calls

pytestmark = pytest.mark.integration

TWO_HALVES = {"all": ["3g.40gb", "3g.40gb"]}


@pytest.fixture
def smi(tmp_path):
    return fake_smi(tmp_path, fixture_path("nvidia-smi", "a100-sxm4-v12.xml"), gpus=2)


def apply(tmp_path, smi, check=False, env=None, **role_vars):
    values = {"mig_nvidia_smi_path": smi[0], "mig_mode": "enabled"}
    values.update(("mig_%s" % k, v) for k, v in role_vars.items())
    return run_role(tmp_path, "mig", values, "mig_result", check=check, env=env)


def layouts(state_path):
    return [sorted(gi["profile"] for gi in gpu["gpu_instances"]) for gpu in read_state(state_path)["gpus"]]


def edit_state(path, change):
    state = read_state(path)
    change(state)
    with open(path, "w") as handle:
        json.dump(state, handle)


def test_refuses_without_confirmation_and_changes_nothing(tmp_path, smi):
    run = apply(tmp_path, smi, layout=TWO_HALVES)
    assert run.rc != 0
    assert "mig: 2 step(s) to take on GPU(s) 0, 1, but confirm is not true; nothing was changed" in run.output
    assert setting_calls(read_state(smi[1])) == []
    assert layouts(smi[1]) == [[], []]


def test_check_mode_shows_the_steps_without_confirmation(tmp_path, smi):
    run = apply(tmp_path, smi, check=True, layout=TWO_HALVES)
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 1
    assert [s["commands"] for s in run.result["steps"]] == [
        [["mig", "-i", "0", "-cgi", "3g.40gb,3g.40gb", "-C"]], [["mig", "-i", "1", "-cgi", "3g.40gb,3g.40gb", "-C"]]]
    assert setting_calls(read_state(smi[1])) == []
    assert '+            "3g.40gb",' in run.output


def test_creates_the_layout_verifies_and_is_idempotent_then_replaces_it(tmp_path, smi):
    run = apply(tmp_path, smi, layout=TWO_HALVES, confirm=True)
    assert run.rc == 0, run.output[-4000:]
    assert run.changed == 1
    assert layouts(smi[1]) == [["3g.40gb", "3g.40gb"]] * 2
    assert run.result["gpus"]["gpu1"]["instances"] == ["3g.40gb", "3g.40gb"]

    calls = len(read_state(smi[1])["calls"])
    again = apply(tmp_path, smi, layout=TWO_HALVES, confirm=True)
    assert again.rc == 0 and again.changed == 0
    assert setting_calls(read_state(smi[1]), since=calls) == []

    calls = len(read_state(smi[1])["calls"])
    whole = apply(tmp_path, smi, layout={"1": ["7g.80gb"]}, confirm=True)
    assert whole.rc == 0, whole.output[-4000:]
    assert layouts(smi[1]) == [["3g.40gb", "3g.40gb"], ["7g.80gb"]]
    assert setting_calls(read_state(smi[1]), since=calls) == [
        ["mig", "-i", "1", "-dci"], ["mig", "-i", "1", "-dgi"], ["mig", "-i", "1", "-cgi", "7g.80gb", "-C"]]


def test_refuses_while_gpu_processes_run(tmp_path, smi):
    edit_state(smi[1], lambda s: s["gpus"][1]["processes"].append({"pid": 4242, "name": "python", "used_memory": 900}))
    for check in (True, False):
        run = apply(tmp_path, smi, check=check, layout=TWO_HALVES, confirm=True)
        assert run.rc != 0
        assert "refusing to change MIG on GPUs with running processes: pid 4242 (python) on GPU-" in run.output
    assert setting_calls(read_state(smi[1])) == []
    # A GPU that would not change may run processes.
    run = apply(tmp_path, smi, gpus=["0"], layout={"0": ["7g.80gb"]}, confirm=True)
    assert run.rc == 0, run.output[-4000:]
    assert layouts(smi[1]) == [["7g.80gb"], []]


def test_mode_off_and_a_mode_change_waiting_for_reset(tmp_path, smi):
    run = apply(tmp_path, smi, gpus=["1"], mode="disabled", confirm=True)
    assert run.rc == 0, run.output[-4000:]
    assert [g["mig_mode_current"] for g in read_state(smi[1])["gpus"]] == ["Enabled", "Disabled"]

    run = apply(tmp_path, smi, gpus=["1"], layout=TWO_HALVES, confirm=True, env={"HYDRA_FAKE_SMI_MIG_NEEDS_RESET": "1"})
    assert run.rc == 0, run.output[-4000:]
    gpu1 = read_state(smi[1])["gpus"][1]
    assert (gpu1["mig_mode_current"], gpu1["mig_mode_pending"]) == ("Disabled", "Enabled")
    assert run.result["reboot_required_gpus"] == [1]
    assert "MIG mode pending on GPU(s) 1: reset / reboot required" in run.output
    # No layout can be made before the reset.
    assert layouts(smi[1])[1] == []


@pytest.mark.parametrize("role_vars, message", [
    ({"layout": {"all": ["3g.40gbx"]}}, "layout.all: '3g.40gbx' is not a GPU instance profile name"),
    ({"layout": {"5": ["1g.10gb"]}}, "layout: '5' names no selected GPU; selected: 0, 1"),
    ({"mode": "disabled", "layout": TWO_HALVES}, "layout: GPU instances need MIG enabled, but mode is 'disabled'"),
])
def test_bad_input_is_one_line(tmp_path, smi, role_vars, message):
    run = apply(tmp_path, smi, confirm=True, **role_vars)
    assert run.rc != 0
    assert message in run.output
    assert setting_calls(read_state(smi[1])) == []
