"""The profile module's main(): argument handling, check mode, one-line errors, SIGTERM during the disk benchmark."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.continuum.hydra.plugins.modules import profile


def _main(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            profile.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def test_static_only_in_check_mode_changes_nothing(capsys, tmp_path):
    code, out = _main(capsys, benchmarks=[], _ansible_check_mode=True, run_log=str(tmp_path / "run.jsonl"))
    assert code == 0 and out["changed"] is False
    assert out["schema_version"] == "1.0.0" and out["static_profile"]["cpu"]["cores_logical"] >= 1
    assert out["run_log"] == str(tmp_path / "run.jsonl") and (tmp_path / "run.jsonl").exists()


def test_unknown_benchmark_is_rejected_by_the_argument_spec(capsys):
    code, out = _main(capsys, benchmarks=["network"])
    assert code == 1 and "benchmarks" in out["msg"] and "cpu, memory, disk, gpu" in out["msg"]


def test_bad_benchmark_option_fails_with_one_line_naming_it(capsys):
    code, out = _main(capsys, benchmarks=["disk"], benchmark_options={"disk": {"file_size_mib": -1}})
    assert code == 1 and out["failed"] is True
    assert out["msg"] == "benchmark_options.disk.file_size_mib: -1 is not a positive integer"


def test_sigterm_during_the_disk_benchmark_fails_the_task_cleanly(capsys, monkeypatch):
    from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import disk

    def terminated(**kwargs):
        raise disk.Terminated("terminated by signal 15")
    monkeypatch.setattr(profile._profile, "run", terminated)
    code, out = _main(capsys, benchmarks=["disk"])
    assert code == 1
    assert out["msg"] == "profile: terminated by signal 15 during the disk benchmark; its test file was removed"
