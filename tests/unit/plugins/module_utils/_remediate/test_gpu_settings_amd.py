"""The power cap of AMD GPUs: amd-smi records -> state, plan (amd-smi args), verify, check-mode prediction."""

import copy
import json
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import parse_amd_smi
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import gpu_settings as gs
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

MI210 = os.path.join(REPO, "tests", "fixtures", "amd", "amd-smi", "dme-mi210-static-inbox-driver.json")


def static_doc():
    with open(MI210) as handle:
        return json.load(handle)


def state_of(document, metric='[{"gpu": 0}]'):
    return gs.amd_state(parse_amd_smi(json.dumps(document), metric))


def test_recorded_mi210_cap_and_range_are_read():
    gpu = state_of(static_doc())[0]
    assert (gpu["index"], gpu["power_limit"], gpu["power_min_limit"], gpu["power_max_limit"]) == (0, 300.0, 0.0, 300.0)
    assert gpu["persistence_mode"] is None and gpu["compute_mode"] is None  # NVIDIA-only: never read on AMD


def test_newer_ppt0_shape_is_read():
    document = static_doc()
    limit = document["gpu_data"][0]["limit"]
    for key in ("max_power", "min_power", "socket_power"):
        del limit[key]
    limit["ppt0"] = {"socket_power_limit": {"value": 650, "unit": "W"}, "max_power_limit": {"value": 750, "unit": "W"},
                     "min_power_limit": {"value": 400, "unit": "W"}}
    gpu = state_of(document)[0]
    assert (gpu["power_limit"], gpu["power_min_limit"], gpu["power_max_limit"]) == (650.0, 400.0, 750.0)
    with pytest.raises(gs.GpuSettingsError, match=r"^power_limit: 300 W is outside GPU 0's range 400-750 W$"):
        gs.plan_amd([gpu], {"power_limit": 300})


def test_plan_sets_the_cap_with_amd_smi_only_where_it_differs():
    gpus = state_of(static_doc())
    assert gs.plan_amd(gpus, {"power_limit": 250}) == [
        {"index": 0, "uuid": gpus[0]["uuid"], "setting": "power_limit", "before": 300.0, "after": 250.0,
         "args": ["set", "--gpu", "0", "--power-cap", "250"]}]
    assert gs.plan_amd(gpus, {"power_limit": 300}) == []
    assert gs.plan_amd(gpus, {"power_limit": 300.0}) == []
    assert gs.plan_amd(gpus, {"power_limit": None, "persistence_mode": True}) == []  # NVIDIA-only: not planned


@pytest.mark.parametrize("desired, message", [
    ({"power_limit": 301}, r"^power_limit: 301 W is outside GPU 0's range 0-300 W$"),
    ({"power_limit": 250.5}, r"^power_limit: 250.5 W is not whole watts; amd-smi --power-cap takes whole watts$"),
    ({"power_limit": -5}, r"^power_limit: -5 is not a positive number of watts$"),
])
def test_bad_cap_is_one_line(desired, message):
    with pytest.raises(gs.GpuSettingsError, match=message):
        gs.plan_amd(state_of(static_doc()), desired)


@pytest.mark.parametrize("value", ["N/A", "AMDSMI_STATUS_NOT_SUPPORTED"])
def test_absent_or_unreadable_cap_is_refused_not_guessed(value):
    document = static_doc()
    document["gpu_data"][0]["limit"]["socket_power"] = value
    gpus = state_of(document)
    assert gpus[0]["power_limit"] is None
    with pytest.raises(gs.GpuSettingsError, match=r"^power_limit: AMD GPU 0 does not report a power cap"):
        gs.plan_amd(gpus, {"power_limit": 250})


def test_verify_and_prediction():
    gpus = state_of(static_doc())
    changes = gs.plan_amd(gpus, {"power_limit": 250})
    assert gs.predicted(gpus, changes)[0]["power_limit"] == 250.0
    assert gs.unverified(changes, gpus) == [(0, "power_limit", 300.0)]  # the cap did not take
    applied = copy.deepcopy(static_doc())
    applied["gpu_data"][0]["limit"]["socket_power"]["value"] = 250
    assert gs.unverified(changes, state_of(applied)) == []
