"""doctor's levels: every check has one, derived from its probes' cost; a run leaves out the checks above its level."""

import importlib.util
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import dcgm, rvs
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.module_utils._status import PASS
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

# Probes that start a subprocess other than the one nvidia-smi -q -x, open an NVML session, or load a GPU.
NOT_QUICK = ("torch", "kernel_log", "nvml", "nvlink", "fabric_manager", "nvcc", "time_sync", "dcgm_diag", "rvs")


def test_level_words_order_and_helpers():
    assert levels.LEVELS == ("quick", "standard", "deep") and levels.DEFAULT == levels.STANDARD
    assert levels.highest([None, levels.QUICK, levels.DEEP, levels.STANDARD]) == levels.DEEP
    assert levels.highest([]) == levels.QUICK
    assert levels.within(levels.QUICK, levels.STANDARD) and not levels.within(levels.DEEP, levels.STANDARD)
    assert levels.is_level("deep") and not levels.is_level("Deep") and not levels.is_level(None)


def test_every_check_has_a_level_and_list_checks_shows_it():
    assert all(levels.is_level(chk.level) for chk in CATALOGUE)
    listed = _doctor.list_catalogue()
    assert [entry["level"] for entry in listed] == [chk.level for chk in CATALOGUE]
    assert {entry["id"]: entry["level"] for entry in listed}["gpu.dcgm_diag"] == levels.DEEP
    for chk in CATALOGUE:
        assert chk.level == levels.highest([chk.declared_level] + [probe_catalogue.probe_level(p) for p in chk.probes])


def test_probe_levels_follow_their_cost():
    assert all(levels.is_level(probe_catalogue.probe_level(name)) for name in probe_catalogue.PROBES)
    assert set(probe_catalogue.PROBE_LEVELS) <= set(probe_catalogue.PROBES)
    for name in NOT_QUICK:
        assert probe_catalogue.probe_level(name) != levels.QUICK, name
    assert probe_catalogue.probe_level("dcgm_diag") == probe_catalogue.probe_level("rvs") == levels.DEEP
    assert set(_doctor.ALWAYS_PROBED) <= set(n for n, lvl in probe_catalogue.PROBE_LEVELS.items() if lvl == levels.QUICK)
    assert probe_catalogue.probe_level("a_probe_added_later") == levels.STANDARD


def test_quick_keeps_the_nvidia_smi_gpu_health_checks_and_leaves_out_the_subprocess_ones():
    quick = set(chk.id for chk in registry.select(CATALOGUE, level=levels.QUICK))
    assert {"driver.nvidia_smi", "gpu.ecc_errors", "gpu.row_remap", "gpu.pcie_link", "gpu.temperature", "system.dev_shm"} <= quick
    assert not quick & {"pytorch.installed", "gpu.xid_errors", "gpu.nvml_devices", "gpu.nvlink", "gpu.dcgm_diag", "gpu.rvs"}
    standard = registry.select(CATALOGUE, level=levels.STANDARD)
    assert "gpu.xid_errors" in [c.id for c in standard] and "gpu.dcgm_diag" not in [c.id for c in standard]
    assert len(registry.select(CATALOGUE, level=levels.DEEP)) == len(CATALOGUE)


def _func(probes, expect):
    return finding(PASS, "ok")


def test_a_declared_level_raises_a_check_never_lowers_it_and_must_be_a_level():
    assert registry.Check("x.cheap", "t", _func, ("nvidia_smi",), ()).level == levels.QUICK
    assert registry.Check("x.active", "t", _func, ("nvidia_smi",), (), levels.DEEP).level == levels.DEEP
    assert registry.Check("x.torch", "t", _func, ("torch",), (), levels.QUICK).level == levels.STANDARD
    assert registry.Check("x.uses", "t", _func, ("host",), ("kernel_log",)).level == levels.STANDARD
    with pytest.raises(ValueError, match=r"check x.bad: level 'fast' is not one of quick, standard, deep"):
        registry.check("x.bad", "t", level="fast")


def _recording_table(called):
    def probe(name):
        def run_probe(options):
            called.append(name)
            if name == "host":
                return {"hostname": "test-host"}
            raise ProbeAbsent("not on this test host")
        return run_probe
    return dict((name, probe(name)) for name in probe_catalogue.PROBES)


@pytest.mark.parametrize("level", levels.LEVELS)
def test_a_run_calls_only_the_probes_of_its_level_and_checks_above_it_are_absent(level):
    called = []
    result = _doctor.run(level=level, probes=_recording_table(called))
    assert result["level"] == level
    assert all(levels.within(probe_catalogue.probe_level(name), level) for name in called)
    ids = [chk["id"] for chk in result["checks"]]
    assert ids == [chk.id for chk in CATALOGUE if levels.within(chk.level, level)]
    if level != levels.DEEP:
        assert "dcgm_diag" not in called and "gpu.dcgm_diag" not in ids


def test_quick_on_this_host_starts_no_torch_journalctl_or_nvml():
    result = _doctor.run(level=levels.QUICK)
    assert set(result["probes"]) <= set(n for n in probe_catalogue.PROBES if probe_catalogue.probe_level(n) == levels.QUICK)
    assert not set(result["probes"]) & set(NOT_QUICK)


def test_only_naming_checks_above_the_level_is_an_error_naming_the_level_needed():
    with pytest.raises(_doctor.DoctorInputError) as caught:
        _doctor.run(only=["gpu.dcgm_diag"], level=levels.STANDARD, probes=_recording_table([]))
    assert str(caught.value) == ("only: 'gpu.dcgm_diag' (level deep) selects only checks above level standard; "
                                 "run with level: deep (levels: quick, standard, deep)")
    with pytest.raises(_doctor.DoctorInputError, match=r"'pytorch' \(level standard\) selects only checks above level quick"):
        _doctor.run(only=["gpu.ecc_errors", "pytorch"], level=levels.QUICK, probes=_recording_table([]))
    # A prefix that also selects checks within the level runs those.
    result = _doctor.run(only=["gpu"], level=levels.QUICK, probes=_recording_table([]))
    assert result["checks"] and all(c["id"].startswith("gpu.") for c in result["checks"])
    assert "gpu.xid_errors" not in [c["id"] for c in result["checks"]]


@pytest.mark.parametrize("kwargs, message", [
    ({"level": "fast"}, "level: 'fast' is not a level; accepted: quick, standard, deep"),
    ({"expect": {"dcgm_diag_level": 5}}, "expect.dcgm_diag_level: 5 is not one of 1, 2, 3, 4"),
    ({"expect": {"rvs_level": 0}}, "expect.rvs_level: 0 is not one of 1, 2, 3, 4, 5"),
    ({"expect": {"dcgm_diag_level": "3"}}, "expect.dcgm_diag_level: '3' is not a int"),
    ({"timeouts": {"dcgm": 10}}, "timeouts: unknown probe 'dcgm'"),
])
def test_bad_level_inputs_are_one_line(kwargs, message):
    with pytest.raises(_doctor.DoctorInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _doctor.run(probes=_recording_table([]), **kwargs)


def test_deep_deadline_covers_the_active_tools_unless_given():
    standard = _doctor.resolved_timeouts({}, {}, levels.STANDARD)
    assert standard["total"] == _doctor.DEFAULT_TOTAL_TIMEOUT and standard["dcgm_diag"] == dcgm.DIAG_TIMEOUTS[2]
    deep = _doctor.resolved_timeouts({}, {"dcgm_diag_level": 3}, levels.DEEP)
    assert deep["dcgm_diag"] == 2700 and deep["rvs"] == rvs.DEFAULT_TIMEOUT
    assert deep["total"] == _doctor.DEFAULT_TOTAL_TIMEOUT + 2700 + rvs.DEFAULT_TIMEOUT + deep["active"]
    given = _doctor.resolved_timeouts({"total": 600, "dcgm_diag": 100}, {"dcgm_diag_level": 3}, levels.DEEP)
    assert given["total"] == 600 and given["dcgm_diag"] == 100


def test_generated_catalogue_doc_has_a_level_column():
    spec = importlib.util.spec_from_file_location("gen_checks_doc", os.path.join(REPO, "tests", "utils", "gen_checks_doc.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.render()
    assert "| id | title | level | reads |" in text
    assert "| [`gpu.dcgm_diag`](#gpudcgm_diag) | DCGM diagnostic (dcgmi diag) | deep | dcgm_diag, nvidia_smi |" in text
    assert "**ECC errors** — level `quick`; reads: `nvidia_smi`" in text
