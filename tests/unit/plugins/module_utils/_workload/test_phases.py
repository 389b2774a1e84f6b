"""The phase-timing helper: recording (in-process and as a standalone script) and the per-phase summary."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._workload import phases
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

HELPER = os.path.join(REPO, "plugins", "module_utils", "_workload", "phases.py")


class Clock:
    """A clock that advances only when told (the records' durations are then exact)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_steps_phases_and_decorators_write_one_line_each(tmp_path):
    path = tmp_path / "phases.jsonl"
    clock = Clock()
    recorder = phases.Recorder(str(path), clock=clock)

    @recorder.timed("optimizer")
    def optimise():
        clock.now += 0.5

    for _step in range(2):
        with recorder.step():
            with recorder.phase("forward"):
                clock.now += 1.0
            with recorder.phase("backward"):
                clock.now += 2.0
            optimise()
    recorder.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[:4] == [{"phase": "forward", "step": 0, "s": 1.0}, {"phase": "backward", "step": 0, "s": 2.0},
                           {"phase": "optimizer", "step": 0, "s": 0.5}, {"phase": None, "step": 0, "s": 3.5}]
    assert records[-1] == {"phase": None, "step": 1, "s": 3.5}


def test_a_phase_that_raises_is_still_recorded(tmp_path):
    path = tmp_path / "p.jsonl"
    recorder = phases.Recorder(str(path))
    with pytest.raises(ValueError), recorder.phase("data"):
        raise ValueError("bad batch")
    recorder.close()
    assert json.loads(path.read_text())["phase"] == "data"


def test_without_a_path_nothing_is_written(tmp_path):
    recorder = phases.Recorder(None)
    with recorder.step(), recorder.phase("forward"):
        pass
    assert recorder.step_index == 1 and list(tmp_path.iterdir()) == []


def test_summary_gives_median_p95_share_and_the_dominant_phase():
    records = []
    for step, (forward, backward) in enumerate([(1.0, 2.0), (1.0, 2.0), (1.0, 2.0), (3.0, 2.0)]):
        records += [{"phase": "forward", "step": step, "s": forward}, {"phase": "backward", "step": step, "s": backward},
                    {"phase": None, "step": step, "s": forward + backward + 0.5}]
    summary = phases.summarise(records)
    assert summary["steps"] == 4 and summary["dominant"] == "backward"
    assert summary["phases"]["forward"] == {"count": 4, "median_s": 1.0, "p95_s": 2.7, "total_s": 6.0, "share": 0.375}
    assert summary["phases"]["backward"]["share"] == 0.5
    assert summary["unaccounted_share"] == 0.125  # 2 s of the 16 s of steps is in no phase
    assert summary["step_median_s"] == 3.5
    warm = phases.summarise(records, skip_steps=3)
    assert warm["steps"] == 1 and warm["dominant"] == "forward"


def test_summary_without_steps_shares_the_phase_total_and_none_when_empty():
    summary = phases.summarise([{"phase": "a", "step": 0, "s": 1.0}, {"phase": "b", "step": 0, "s": 3.0}])
    assert summary["phases"]["b"]["share"] == 0.75 and summary["steps"] == 0 and summary["unaccounted_share"] is None
    assert phases.summarise([]) is None


def test_unreadable_lines_are_counted_not_fatal():
    records, bad = phases.parse_lines(['{"phase": "a", "step": 0, "s": 1}', "garbage", '{"phase": 3, "s": 1}', '{"s": "x"}', ""])
    assert records == [{"phase": "a", "step": 0, "s": 1.0}] and bad == 3


def test_the_helper_file_works_outside_ansible_by_path_and_by_env_var(tmp_path):
    out = tmp_path / "phases.jsonl"
    script = tmp_path / "train.py"
    script.write_text(
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('hydra_phases', sys.argv[1])\n"
        "phases = importlib.util.module_from_spec(spec); spec.loader.exec_module(phases)\n"
        "for i in range(3):\n"
        "    with phases.step():\n"
        "        with phases.phase('forward'): pass\n"
        "        with phases.phase('backward'): pass\n")
    env = dict(os.environ, HYDRA_PHASES_FILE=str(out))
    subprocess.run([sys.executable, str(script), HELPER], check=True, env=env, timeout=60)
    records, bad = phases.parse_lines(out.read_text().splitlines())
    assert bad == 0 and len(records) == 9
    assert set(phases.summarise(records)["phases"]) == {"forward", "backward"}
