"""The doctor module's main(): argument handling, fail_on, check mode, one-line errors."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor_run
from ansible_collections.continuum.hydra.plugins.modules import doctor


def _main(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            doctor.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def test_list_checks_returns_the_catalogue_without_reading_the_host(capsys, monkeypatch):
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue
    monkeypatch.setattr(catalogue, "collect", lambda *a, **k: pytest.fail("probes ran"))
    code, out = _main(capsys, list_checks=True)
    assert code == 0 and out["changed"] is False
    assert [c["id"] for c in out["catalogue"]] == [c["id"] for c in doctor_run.list_catalogue()]
    assert "checks" not in out


def test_a_typo_in_only_fails_with_one_line_naming_it(capsys):
    code, out = _main(capsys, only=["gpu.ecc_erors"])
    assert code == 1 and out["failed"] is True
    assert out["msg"].startswith("only: 'gpu.ecc_erors' matches no check id") and "\n" not in out["msg"]


def test_bad_choice_is_rejected_by_the_argument_spec(capsys):
    code, out = _main(capsys, fail_on="sometimes")
    assert code == 1 and "fail_on" in out["msg"] and "never, fail, warn" in out["msg"]


def _fake_run(overall):
    def run(**kwargs):
        return {"schema_version": "x", "checks": [], "summary": {}, "overall_status": overall, "environment": {}, "probes": {}}
    return run


@pytest.mark.parametrize("overall, fail_on, failed", [
    ("failed", "never", False), ("failed", "fail", True), ("error", "fail", True),
    ("warning", "fail", False), ("warning", "warn", True), ("healthy", "warn", False)])
def test_fail_on_fails_the_task_but_keeps_the_result(capsys, monkeypatch, overall, fail_on, failed):
    monkeypatch.setattr(doctor_run, "run", _fake_run(overall))
    code, out = _main(capsys, fail_on=fail_on)
    assert bool(out.get("failed")) is failed and (code == 1) is failed
    assert out["overall_status"] == overall and out["changed"] is False
    if failed:
        assert out["msg"] == "doctor: host is %s (fail_on=%s)" % (overall, fail_on)


def test_check_mode_runs_and_changes_nothing(capsys, monkeypatch):
    monkeypatch.setattr(doctor_run, "run", _fake_run("healthy"))
    code, out = _main(capsys, _ansible_check_mode=True)
    assert code == 0 and out["changed"] is False and out["overall_status"] == "healthy"


def test_a_tiny_total_deadline_still_returns_the_whole_result(capsys, monkeypatch):
    import threading

    from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue
    from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, READ_FAILED

    def slow_host(options):
        threading.Event().wait(0.05)  # the deadline passes while the host facts are read
        return {"hostname": "slow-host"}

    monkeypatch.setitem(catalogue.PROBES, "host", slow_host)
    code, out = _main(capsys, timeouts={"total": "0.01"})  # a string: the argument spec makes it a number
    assert code == 0 and out["changed"] is False
    # Every check of the default level (standard), none above it.
    assert [c["id"] for c in out["checks"]] == [c["id"] for c in doctor_run.list_catalogue() if c["level"] != "deep"]
    assert out["level"] == "standard"
    assert sum(out["summary"].values()) == len(out["checks"])
    reason = "not run: doctor deadline (timeouts.total=0.01s)"
    assert out["probes"]["nvidia_smi"]["status"] == READ_FAILED and out["probes"]["nvidia_smi"]["reason"] == reason
    not_run = [c for c in out["checks"] if c["message"] == reason]
    assert not_run and all(c["status"] == ERROR for c in not_run)
    assert out["environment"]["hostname"] == "slow-host"


def test_an_unknown_timeout_key_is_rejected(capsys):
    code, out = _main(capsys, timeouts={"nvidia-smi": 3})
    assert code == 1 and "nvidia-smi" in out["msg"]


def test_level_quick_runs_the_quick_checks_and_a_bad_level_or_only_above_it_is_one_line(capsys):
    code, out = _main(capsys, level="quick")
    assert code == 0 and out["level"] == "quick"
    assert [c["id"] for c in out["checks"]] == [c["id"] for c in doctor_run.list_catalogue() if c["level"] == "quick"]
    code, out = _main(capsys, level="fast")
    assert code == 1 and "level" in out["msg"] and "quick, standard, deep" in out["msg"]
    code, out = _main(capsys, only=["gpu.dcgm_diag"])
    assert code == 1 and out["msg"] == ("only: 'gpu.dcgm_diag' (level deep) selects only checks above level standard; "
                                        "run with level: deep (levels: quick, standard, deep)")
