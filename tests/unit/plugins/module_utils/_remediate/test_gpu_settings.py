"""GPU settings planning over `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` output."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import gpu_settings as gs

# Two A100s as nvidia-smi prints the query fields of _gpu_settings.QUERY_FIELDS (values from the recorded A100).
STATE = (
    "0, GPU-513536b6-7d19-9063-b049-1e69664bb298, 00000000:01:00.0, NVIDIA A100-SXM4-80GB, Disabled, 500.00, 100.00, "
    "500.00, 1593, 1275, Default, Enabled, Enabled\n"
    "1, GPU-513536b6-7d19-9063-b049-1e69664bb299, 00000000:41:00.0, NVIDIA A100-SXM4-80GB, Enabled, 400.00, 100.00, "
    "500.00, 1593, 1410, Exclusive_Process, Enabled, Disabled\n"
)
NO_ECC = "0, GPU-x, 00000000:01:00.0, NVIDIA GeForce RTX 3080, Disabled, 320.00, 100.00, 370.00, [N/A], [N/A], Default, [N/A], [N/A]\n"


def gpus():
    return gs.parse_state(STATE)


def test_parse_state_numbers_and_not_available():
    first = gpus()[0]
    assert first["index"] == 0 and first["power_limit"] == 500.0 and first["application_clock_graphics"] == 1275
    rtx = gs.parse_state(NO_ECC)[0]
    assert rtx["ecc_mode_pending"] is None and rtx["application_clock_memory"] is None
    # A power limit nvidia-smi could not read is no power limit to plan from, as one it does not report.
    unread = gs.parse_state(NO_ECC.replace("320.00", "[Unknown Error]"))[0]
    assert unread["power_limit"] is None and unread["power_min_limit"] == 100.0


def test_plan_changes_only_what_differs():
    changes = gs.plan(gpus(), {"persistence_mode": True, "power_limit": 400, "compute_mode": "EXCLUSIVE_PROCESS"})
    assert [(c["index"], c["setting"], c["args"]) for c in changes] == [
        (0, "persistence_mode", ["-i", "0", "-pm", "1"]),
        (0, "power_limit", ["-i", "0", "-pl", "400"]),
        (0, "compute_mode", ["-i", "0", "-c", "3"]),
    ]
    assert gs.plan(gpus(), {"persistence_mode": None, "ecc_mode": None}) == []


def test_ecc_compares_the_pending_mode_and_reports_the_reboot():
    state = gpus()
    # GPU 1 is already pending Disabled: only GPU 0 needs the command; both then wait for a reboot.
    changes = gs.plan(state, {"ecc_mode": False})
    assert [(c["index"], c["args"]) for c in changes] == [(0, ["-i", "0", "-e", "0"])]
    assert gs.reboot_required(gs.predicted(state, changes), {"ecc_mode": False}) == [0, 1]
    assert gs.reboot_required(state, {}) == []


def test_locked_clocks_compare_with_the_record():
    record = {"GPU-513536b6-7d19-9063-b049-1e69664bb298": {"min": 1200, "max": 1410}}
    changes = gs.plan(gpus(), {"locked_clocks": {"min": 1200, "max": 1410}}, record)
    assert [(c["index"], c["before"]) for c in changes] == [(1, None)]


@pytest.mark.parametrize("desired, message", [
    ({"power_limit": 600}, "power_limit: 600 W is outside GPU 0's range 100-500 W"),
    ({"compute_mode": "SHARED"}, "compute_mode: 'SHARED' is not one of DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED"),
    ({"application_clocks": {"memory": 1593}}, "application_clocks: {'memory': 1593} must be {memory: N, graphics: N}"),
    ({"locked_clocks": {"min": 1500, "max": 1000}}, "locked_clocks: min 1500 MHz is above max 1000 MHz"),
    ({"fan": 100}, "unknown setting 'fan'"),
])
def test_bad_input(desired, message):
    with pytest.raises(gs.GpuSettingsError) as err:
        gs.plan(gpus(), desired)
    assert str(err.value).startswith(message)


def test_unsupported_settings_are_named():
    with pytest.raises(gs.GpuSettingsError, match="ecc_mode: GPU 0 does not support ECC"):
        gs.plan(gs.parse_state(NO_ECC), {"ecc_mode": True})
    with pytest.raises(gs.GpuSettingsError, match="application_clocks: GPU 0 does not support application clocks"):
        gs.plan(gs.parse_state(NO_ECC), {"application_clocks": {"memory": 1, "graphics": 2}})


def test_select_by_index_uuid_or_bus_id():
    state = gpus()
    assert [g["index"] for g in gs.select(state, ["00000000:41:00.0"])] == [1]
    assert [g["index"] for g in gs.select(state, ["GPU-513536b6-7d19-9063-b049-1e69664bb298", "0"])] == [0]
    assert len(gs.select(state, [])) == 2
    with pytest.raises(gs.GpuSettingsError, match=r"gpus: '9' matches no GPU; this host has 0 \(GPU-"):
        gs.select(state, ["9"])


def test_unverified_names_what_did_not_take():
    state = gpus()
    changes = gs.plan(state, {"persistence_mode": True, "power_limit": 450})
    assert [(p[0], p[1]) for p in gs.unverified(changes, state)] == [(0, "persistence_mode"), (0, "power_limit"),
                                                                     (1, "power_limit")]
    assert gs.unverified(changes, gs.predicted(state, changes)) == []


def test_wrong_column_count_is_an_error_not_a_guess():
    with pytest.raises(gs.GpuSettingsError, match="nvidia-smi printed 2 values where 13 were asked for"):
        gs.parse_state("0, GPU-x\n")
