"""MIG planning: the `nvidia-smi mig -lgi` table, layouts, the refusal while processes run."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import mig as _mig

# The table layout of `nvidia-smi mig -lgi` (NVIDIA MIG user guide).
LGI = """+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   0  MIG 3g.40gb          9        1          4:4     |
+-------------------------------------------------------+
|   0  MIG 3g.40gb          9        2          0:4     |
+-------------------------------------------------------+
|   1  MIG 1g.10gb         19        7          6:1     |
+-------------------------------------------------------+
"""
MODES = ("0, GPU-aaa, 00000000:01:00.0, Enabled, Enabled\n"
         "1, GPU-bbb, 00000000:41:00.0, Enabled, Enabled\n"
         "2, GPU-ccc, 00000000:81:00.0, Disabled, Disabled\n")


def test_parse_lgi_and_none_found():
    instances = _mig.parse_gpu_instances(LGI)
    assert [(i["gpu"], i["profile"], i["instance_id"], i["placement"]) for i in instances] == [
        (0, "3g.40gb", 1, "4:4"), (0, "3g.40gb", 2, "0:4"), (1, "1g.10gb", 7, "6:1")]
    assert _mig.parse_gpu_instances("No GPU instances found: Not Found\n") == []


def test_plan_keeps_matching_layouts_and_replaces_others():
    gpus, instances = _mig.parse_modes(MODES), _mig.parse_gpu_instances(LGI)
    steps = _mig.plan(gpus[:2], "enabled", {"all": ["3g.40gb", "3g.40gb"]}, instances, [])
    assert [(s["index"], s["commands"]) for s in steps] == [
        (1, [["mig", "-i", "1", "-dci"], ["mig", "-i", "1", "-dgi"], ["mig", "-i", "1", "-cgi", "3g.40gb,3g.40gb", "-C"]])]


def test_plan_enables_mode_then_layout_and_disables():
    gpus = _mig.parse_modes(MODES)
    steps = _mig.plan([gpus[2]], "enabled", {"2": ["7g.80gb"]}, [], [])
    assert [(s["action"], s["commands"]) for s in steps] == [
        ("mode", [["-i", "2", "-mig", "1"]]), ("layout", [["mig", "-i", "2", "-cgi", "7g.80gb", "-C"]])]
    assert [s["commands"] for s in _mig.plan([gpus[0]], "disabled", {}, [], [])] == [[["-i", "0", "-mig", "0"]]]


def test_refuses_while_processes_run_on_a_gpu_it_would_change():
    gpus, instances = _mig.parse_modes(MODES), _mig.parse_gpu_instances(LGI)
    apps = _mig.parse_apps("4242, GPU-bbb, python\n")
    with pytest.raises(_mig.MigError, match=r"refusing to change MIG on GPUs with running processes: pid 4242 \(python\) on GPU-bbb"):
        _mig.plan(gpus, "enabled", {"1": ["7g.80gb"]}, instances, apps)
    # GPU 0 is left as it is: processes on GPU 1 do not matter.
    assert _mig.plan(gpus[:2], "enabled", {"0": ["3g.40gb", "3g.40gb"]}, instances, apps) == []


@pytest.mark.parametrize("mode, layout, message", [
    ("on", {}, "mode: 'on' is not one of enabled, disabled"),
    ("disabled", {"all": ["1g.10gb"]}, "layout: GPU instances need MIG enabled"),
    ("enabled", {"all": "1g.10gb"}, "layout.all: '1g.10gb' is not a list"),
    ("enabled", {"all": ["MIG 1g.10gb"]}, "layout.all: 'MIG 1g.10gb' is not a GPU instance profile name"),
    ("enabled", {"7": ["1g.10gb"]}, "layout: '7' names no selected GPU; selected: 0, 1, 2"),
])
def test_bad_input(mode, layout, message):
    with pytest.raises(_mig.MigError) as err:
        _mig.plan(_mig.parse_modes(MODES), mode, layout, [], [])
    assert str(err.value).startswith(message)


def test_unverified_and_reboot_required():
    gpus = _mig.parse_modes(MODES)
    steps = _mig.plan([gpus[2]], "enabled", {"2": ["7g.80gb"]}, [], [])
    waiting = _mig.parse_modes("2, GPU-ccc, 00000000:81:00.0, Disabled, Enabled\n")
    assert _mig.reboot_required(waiting) == [2]
    assert _mig.unverified(steps, waiting, []) == [(2, "layout", [])]


def test_a_process_name_with_commas_is_one_field():
    # nvidia-smi does not quote its CSV: the last field asked for takes the rest of the line.
    apps = _mig.parse_apps("4242, GPU-bbb, /opt/train,v2/bin/python -m a,b\n")
    assert apps == [{"pid": "4242", "gpu_uuid": "GPU-bbb", "process_name": "/opt/train,v2/bin/python -m a,b"}]
