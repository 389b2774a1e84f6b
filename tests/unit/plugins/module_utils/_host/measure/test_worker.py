"""The worker runner: a child Python with a timeout, its process group killed, its JSON answer checked."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import stream
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker


def test_worker_answers_are_checked():
    with pytest.raises(_worker.WorkerError, match=r"w exited with status 1: ImportError: boom"):
        _worker.parse_answer(1, "", "Traceback...\nImportError: boom\n", "w")
    with pytest.raises(_worker.WorkerError, match=r"w printed no JSON result: 'hello'"):
        _worker.parse_answer(0, "hello\n", "", "w")
    with pytest.raises(_worker.WorkerError, match=r"w printed no result"):
        _worker.parse_answer(0, "\n", "", "w")
    with pytest.raises(_worker.WorkerError, match=r"w printed '\[1\]', not a JSON object"):
        _worker.parse_answer(0, "[1]\n", "", "w")
    assert _worker.parse_answer(0, "noise\n{\"gflops\": 1.5}\n", "", "w") == {"gflops": 1.5}


def test_a_hung_worker_is_killed_with_its_group_at_the_timeout(tmp_path):
    hung = tmp_path / "python"
    hung.write_text("#!/bin/sh\nsleep 600 &\nexec sleep 600\n")
    hung.chmod(0o755)
    proc = _worker.start_worker(stream, {}, python=str(hung))
    beats = []
    with pytest.raises(_worker.WorkerTimeout, match=r"slow timed out after 0.5s"):
        _worker.finish_worker(proc, 0.5, "slow", progress=lambda *args: beats.append(args), step_s=0.1)
    assert proc.poll() is not None
    assert beats and beats[0][0] == "slow"  # progress was reported while it ran


def test_an_interpreter_that_cannot_start_is_a_worker_error(tmp_path):
    with pytest.raises(_worker.WorkerError, match=r"cannot start .*nothing"):
        _worker.start_worker(stream, {}, python=str(tmp_path / "nothing"))


def test_the_worker_gets_its_environment(tmp_path):
    echo = tmp_path / "python"
    echo.write_text("#!/bin/sh\nprintf '{\"value\": \"%s\", \"lang\": \"%s\"}\\n' \"$HYDRA_TEST\" \"$LC_ALL\"\n")
    echo.chmod(0o755)
    answer = _worker.run_worker(stream, {}, 10, "env", python=str(echo), env={"HYDRA_TEST": "x1"})
    assert answer == {"value": "x1", "lang": "C"}
