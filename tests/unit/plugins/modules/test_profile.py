"""The profile module's main(): argument handling, check mode, one-line errors, SIGTERM during the disk benchmark."""

import json
import os

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


def test_a_symlink_planted_as_the_run_log_is_not_followed(capsys, tmp_path):
    # Issue 23: the run log was opened with open(path, "a"): a link planted where it goes sent the log into the file it
    # points at (appending to, say, a root-owned file elsewhere).
    target = tmp_path / "elsewhere.txt"
    target.write_text("not the run log's\n")
    link = tmp_path / "run.jsonl"
    link.symlink_to(target)
    code, out = _main(capsys, benchmarks=[], _ansible_check_mode=True, run_log=str(link))
    assert code == 1 and out["failed"] is True
    assert out["msg"] == "run_log: cannot open %s for appending: it is a symbolic link (not followed)" % link
    assert target.read_text() == "not the run log's\n"


def test_a_fifo_as_the_run_log_is_refused_at_once(capsys, tmp_path):
    # A FIFO without a reader blocked open(path, "a") for ever.
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    code, out = _main(capsys, benchmarks=[], _ansible_check_mode=True, run_log=str(fifo))
    assert code == 1 and out["msg"] == "run_log: cannot open %s for appending: not a regular file" % fifo


def test_a_new_run_log_is_private_to_its_user(capsys, tmp_path):
    code, _out = _main(capsys, benchmarks=[], _ansible_check_mode=True, run_log=str(tmp_path / "run.jsonl"))
    assert code == 0 and os.stat(tmp_path / "run.jsonl").st_mode & 0o777 == 0o600
