"""The doctor framework: selection, gating by probe outcome, isolation of crashes, result shape."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils import _results, _status
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE, PROBE_ROOTS
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, run
from ansible_collections.continuum.hydra.tests.support.doctor_probes import probe_table


def _chk(check_id, func, requires=(), uses=()):
    return registry.Check(check_id, check_id, func, requires, uses)


def test_catalogue_ids_are_unique_dotted_and_categorised():
    ids = [c.id for c in CATALOGUE]
    assert len(ids) == len(set(ids))
    for chk in CATALOGUE:
        assert "." in chk.id and chk.category == chk.id.split(".")[0]
        assert all(p in probe_catalogue.PROBES for p in chk.probes), chk.id


def test_select_matches_whole_dotted_segments():
    checks = [_chk(i, None) for i in ("gpu.ecc_errors", "gpu.ecc_mode", "gpu.count", "gpux.other", "system.numa")]
    assert [c.id for c in registry.select(checks, only=["gpu"])] == ["gpu.ecc_errors", "gpu.ecc_mode", "gpu.count"]
    assert [c.id for c in registry.select(checks, only=["gpu"], exclude=["gpu.ecc_errors"])] == ["gpu.ecc_mode", "gpu.count"]
    assert [c.id for c in registry.select(checks, only=["gpu.ecc"])] == []  # a prefix must end at a dot
    assert registry.unknown_patterns(checks, ["gpu", "gpu.ecc", "nope"]) == ["gpu.ecc", "nope"]


def test_gate_errored_probe_is_error_absent_probe_is_skip_and_uses_reach_the_check():
    seen = {}

    def judge(probes, expect):
        seen.update(probes)
        return _results.finding(_status.PASS, "ok")

    envelopes = {"a": {"status": "error", "reason": "timed out", "data": None},
                 "b": {"status": "absent", "reason": "no such tool", "data": None},
                 "c": {"status": "ok", "reason": None, "data": 1}}
    assert registry.evaluate(_chk("x.a", judge, requires=("a",)), envelopes, {})["status"] == "ERROR"
    assert "timed out" in registry.evaluate(_chk("x.a", judge, requires=("a",)), envelopes, {})["message"]
    assert registry.evaluate(_chk("x.b", judge, requires=("c", "b")), envelopes, {})["status"] == "SKIP"
    assert not seen
    record = registry.evaluate(_chk("x.c", judge, requires=("c",), uses=("a",)), envelopes, {})
    assert record["status"] == "PASS" and set(seen) == {"a", "c"}


def test_a_crashing_check_is_an_error_of_that_check_only():
    def boom(probes, expect):
        raise KeyError("driver_version")

    def bad_status(probes, expect):
        return {"status": "GOOD", "message": "?"}

    record = registry.evaluate(_chk("x.boom", boom), {}, {})
    assert record["status"] == "ERROR" and "KeyError" in record["message"]
    assert registry.evaluate(_chk("x.bad", bad_status), {}, {})["status"] == "ERROR"


def test_probe_outcomes_become_envelopes_and_each_probe_runs_once():
    calls = []

    def counted(options):
        calls.append(1)
        return {"v": 1}

    def crash(options):
        return 1 / 0

    def fails(options):
        raise ProbeError("permission denied")

    table = {"ok": counted, "crash": crash, "fails": fails}
    out = probe_catalogue.collect(["ok", "crash", "ok", "fails"], {}, table)
    assert len(calls) == 1 and out["ok"]["status"] == "ok" and out["ok"]["data"] == {"v": 1}
    assert out["crash"]["status"] == "error" and "ZeroDivisionError" in out["crash"]["reason"]
    assert out["fails"] == dict(out["fails"], status="error", reason="permission denied")


def test_run_has_the_doctor_json_shape_and_consistent_summary():
    result = _doctor.run(probes=probe_table(), level="deep")  # deep: every check of the catalogue
    assert set(result) >= {"schema_version", "environment", "checks", "summary", "overall_status", "total_duration_ms", "probes"}
    assert result["environment"]["hostname"] == "test-host" and result["environment"]["gpus"] == []
    assert sum(result["summary"].values()) == len(result["checks"]) == len(CATALOGUE)
    assert result["summary"] == _results.summarize(result["checks"])
    for chk in result["checks"]:
        assert set(chk) >= {"id", "title", "category", "status", "message", "details", "remediation", "duration_ms"}


def test_only_runs_just_the_probes_the_selected_checks_need():
    ran = []

    def tracking(name):
        def probe(options):
            ran.append(name)
            raise ProbeAbsent("absent")
        return probe

    table = probe_table(**dict((name, tracking(name)) for name in probe_catalogue.PROBES if name != "host"))
    some = CATALOGUE[0]
    _doctor.run(only=[some.id], probes=table)
    assert set(ran) == set(_doctor.ALWAYS_PROBED[1:]) | set(some.probes) - {"host"}


def test_probes_get_resolved_options_not_the_expect_dict():
    options = _doctor.probe_options({"xid_window_hours": 48}, timeouts={"kernel_log": 5})
    assert "expect" not in options
    assert options["xid_window_hours"] == 48 and options["disk_paths"] is None
    assert options["timeouts"] == dict(_doctor.DEFAULT_TIMEOUTS, kernel_log=5)
    options = _doctor.probe_options({"disk_paths": ["/scratch"]})
    assert options["xid_window_hours"] == 24 and options["disk_paths"] == ["/scratch"]
    seen = {}

    def kernel_log(options):
        seen.update(options)
        return {}
    _doctor.run(only=["gpu.xid_errors"], expect={"xid_window_hours": 6}, probes=probe_table(kernel_log=kernel_log))
    assert seen["xid_window_hours"] == 6 and "expect" not in seen


def test_deterministic_results_diff_clean():
    first = _doctor.run(deterministic=True, probes=probe_table())
    second = _doctor.run(deterministic=True, probes=probe_table())
    assert first == second
    assert "total_duration_ms" not in first and "timestamp_utc" not in first["environment"]
    assert [c["id"] for c in first["checks"]] == sorted(c["id"] for c in first["checks"])


@pytest.mark.parametrize("kwargs, message", [
    ({"only": ["gpu.ecc"]}, "only: 'gpu.ecc' matches no check id"),
    ({"exclude": ["nosuch"]}, "exclude: 'nosuch' matches no check id"),
    ({"timeouts": {"nvidia-smi": 3}}, "timeouts: unknown probe 'nvidia-smi'; accepted: active, command, dcgm_diag, kernel_log, nvidia_smi, rvs, torch, total"),
    ({"timeouts": {"torch": 0}}, "timeouts.torch: 0 is not a positive number of seconds"),
    ({"timeouts": {"torch": "10"}}, "timeouts.torch: '10' is not a positive number of seconds"),
    ({"timeouts": {"torch": float("nan")}}, "timeouts.torch: nan is not a positive number of seconds"),
    ({"timeouts": {"total": float("inf")}}, "timeouts.total: inf is not a positive number of seconds"),
    ({"only": [1]}, "only: [1] is not a list of check ids or prefixes"),
    ({"exclude": "gpu"}, "exclude: 'gpu' is not a list of check ids or prefixes"),
    ({"expect": {"no_such_key": 1}}, "expect: unknown key 'no_such_key'"),
    # Nothing left to run would be a "healthy" verdict with nothing judged.
    ({"only": ["gpu.count"], "exclude": ["gpu"]}, "only: ['gpu.count'], exclude: ['gpu'] leave no check to run"),
    ({"exclude": sorted(set(c.category for c in CATALOGUE))}, "only: [], exclude: "),
])
def test_bad_options_are_one_line_errors_naming_the_value(kwargs, message):
    with pytest.raises(_doctor.DoctorInputError) as err:
        _doctor.run(probes=probe_table(), **kwargs)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_fail_on():
    assert not _status.fails_task("failed", "never")
    assert _status.fails_task("failed", "fail") and _status.fails_task("error", "fail")
    assert not _status.fails_task("warning", "fail") and _status.fails_task("warning", "warn")
    assert not _status.fails_task("healthy", "warn")


def test_overall_status_orders_fail_error_warn():
    assert _status.host_verdict({"FAIL": 1, "ERROR": 1, "WARN": 1}) == "failed"
    assert _status.host_verdict({"ERROR": 1, "WARN": 1}) == "error"
    assert _status.host_verdict({"WARN": 1, "SKIP": 3}) == "warning"
    assert _status.host_verdict({"PASS": 2, "SKIP": 3}) == "healthy"


def test_command_runner_kills_a_hang_and_reports_missing_binaries(tmp_path):
    with pytest.raises(ProbeError) as err:
        run(["sleep", "30"], timeout=0.3)
    assert str(err.value) == "sleep 30 timed out after 0.3s"
    with pytest.raises(ProbeAbsent):
        run([str(tmp_path / "nope")], timeout=1)
    script = tmp_path / "noexec"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(ProbeError) as err:
        run([str(script)], timeout=1)
    assert "permission denied" in str(err.value)
    assert run(["sh", "-c", "echo $LANG; echo err >&2; exit 3"], timeout=5) == (3, "C\n", "err\n")


def test_version_constant_matches_galaxy():
    import os

    import yaml

    from ansible_collections.continuum.hydra.tests.support.helpers import REPO
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        assert yaml.safe_load(handle)["version"] == _doctor.HYDRA_VERSION


def test_environment_names_each_gpu_with_the_configuration_drift_compares():
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvidia_smi
    from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
    smi = nvidia_smi.parse_nvidia_smi(read_fixture("nvidia-smi", "a100-sxm4-v12.xml"))
    table = probe_table(nvidia_smi=lambda options: smi, torch=lambda options: {"installed": True, "version": "2.13.0", "nccl_version": "2.21.5"})
    env = _doctor.run(only=["pytorch.installed"], probes=table)["environment"]
    assert env["driver_version"] == "535.54.03" and env["cuda_driver_version"] == "12.2"
    assert env["torch_version"] == "2.13.0" and env["nccl_version"] == "2.21.5"
    assert env["gpus"] == [{
        "index": 0, "pci_bus_id": "00000000:01:00.0", "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298",
        "name": "NVIDIA A100-SXM4-80GB", "driver_version": "535.54.03", "vbios_version": "92.00.36.00.02",
        "serial": "1650522003820", "board_part_number": "692-2G506-0212-002",
        "persistence_mode": "Disabled", "ecc_mode": "Enabled", "mig_mode": "Enabled", "pcie_gen_max": 4,
        "pcie_width_max": 16, "memory_total_mib": 81920}]


# ---------------------------------------------------------------- root causes (blocked_by)

def _hung_table():
    def hung(options):
        raise ProbeError("nvidia-smi -q -x timed out after 10s")
    return probe_table(nvidia_smi=hung)


def test_a_failed_probe_blocks_its_checks_behind_the_selected_root():
    result = _doctor.run(only=["driver", "gpu.ecc_errors", "gpu.temperature"], probes=_hung_table())
    checks = dict((c["id"], c) for c in result["checks"])
    root = checks["driver.nvidia_smi"]
    assert root["status"] == _status.ERROR and "blocked_by" not in root and "timed out after 10s" in root["message"]
    for check_id in ("driver.version", "gpu.ecc_errors", "gpu.temperature"):
        assert checks[check_id]["status"] == _status.SKIP, check_id
        assert checks[check_id]["blocked_by"] == "driver.nvidia_smi", check_id
        assert checks[check_id]["message"].startswith("blocked by driver.nvidia_smi: probe nvidia_smi failed: ")
    # the host is still an error: the root says so
    assert result["overall_status"] == _status.ERRORED and result["summary"][_status.ERROR] == 1


@pytest.mark.parametrize("only, exclude", [(["gpu.ecc_errors", "gpu.temperature"], None), (["gpu", "driver"], ["driver.nvidia_smi"])])
def test_without_the_root_in_the_run_a_failed_probe_stays_an_error_of_each_check(only, exclude):
    result = _doctor.run(only=only, exclude=exclude, probes=_hung_table())
    assert "driver.nvidia_smi" not in [c["id"] for c in result["checks"]]
    requiring = [c for c in result["checks"] if c["id"] in ("gpu.ecc_errors", "gpu.temperature", "driver.version")]
    assert requiring and all(c["status"] == _status.ERROR and "blocked_by" not in c for c in requiring)
    assert all("timed out after 10s" in c["message"] and not c["message"].startswith("blocked by") for c in requiring)
    assert result["overall_status"] == _status.ERRORED


def test_roots_come_from_the_catalogue_and_read_their_probe():
    assert PROBE_ROOTS["nvidia_smi"] == "driver.nvidia_smi"
    by_id = dict((c.id, c) for c in CATALOGUE)
    assert all(probe in by_id[root].probes for probe, root in PROBE_ROOTS.items())
    selected = registry.select(CATALOGUE, only=["gpu"])
    assert registry.roots_for(selected, PROBE_ROOTS) == {"nvml": "gpu.nvml_available"}


def test_the_gate_blocks_only_behind_a_root_and_never_the_root_itself():
    failed = {"p": {"status": "error", "reason": "hung", "data": None}, "q": {"status": "error", "reason": "gone", "data": None}}

    def judge(probes, expect):
        return _results.finding(_status.PASS, "ok")

    roots = {"p": "x.root"}
    assert registry.evaluate(_chk("x.dep", judge, requires=("p",)), failed, {}, roots)["blocked_by"] == "x.root"
    assert registry.evaluate(_chk("x.root", judge, requires=("p",)), failed, {}, roots)["status"] == _status.ERROR
    no_root = registry.evaluate(_chk("x.other", judge, requires=("q",)), failed, {}, roots)
    assert no_root["status"] == _status.ERROR and "blocked_by" not in no_root
    assert registry.evaluate(_chk("x.dep", judge, requires=("p",)), failed, {})["status"] == _status.ERROR  # no roots given


def test_blocked_undoes_a_block_whose_root_did_not_report_an_error_and_follows_chains():
    def rec(check_id, status, blocked_by=None):
        record = {"id": check_id, "status": status, "message": "m %s" % check_id}
        if blocked_by:
            record.update(message="blocked by %s: probe p failed: hung" % blocked_by, blocked_by=blocked_by)
        return record

    out = dict((r["id"], r) for r in registry.blocked([
        rec("a.root", _status.ERROR), rec("a.dep", _status.SKIP, "a.root"),
        rec("b.root", _status.PASS), rec("b.dep", _status.SKIP, "b.root"),  # the root says nothing failed: undo
        rec("c.dep", _status.SKIP, "c.missing"),  # the root is not in the run: undo
        rec("d.mid", _status.SKIP, "a.root"), rec("d.dep", _status.SKIP, "d.mid"),  # a chain ends at a.root
    ]))
    assert out["a.dep"]["status"] == _status.SKIP and out["a.dep"]["blocked_by"] == "a.root"
    for check_id in ("b.dep", "c.dep"):
        assert out[check_id]["status"] == _status.ERROR and "blocked_by" not in out[check_id]
        assert out[check_id]["message"] == "probe p failed: hung"
    assert out["d.dep"]["blocked_by"] == "a.root" and out["d.dep"]["status"] == _status.SKIP
