"""The screening job's pure parts and its wait (issue 27 item 2): the sbatch line, bad options, the recorded states of
real jobs, a job past its time limit. The whole screen against real slurmd is tests/integration/test_screening.py."""

import json
import shlex

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import screen
from ansible_collections.continuum.hydra.plugins.module_utils._host import slurm
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

PARAMS = {"node": "gpu-a01", "program": "/opt/hydra bin/hydra-healthcheck", "level": "deep", "partition": "gpu",
          "time_limit": 30, "start_timeout": 60, "output_dir": "/var/lib/continuum-hydra/screen", "sbatch_args": ["-A", "ops"]}


def test_the_job_is_exclusive_on_the_node_with_its_time_limit_and_writes_where_the_module_reads():
    argv = screen.submit_argv("/usr/bin/sbatch", PARAMS)
    assert argv[:10] == ["/usr/bin/sbatch", "--parsable", "--exclusive", "-w", "gpu-a01", "-J", "hydra-screen", "-t", "30", "-o"]
    assert argv[argv.index("-p") + 1] == "gpu" and argv[-4:-2] == ["-A", "ops"] and argv[-2] == "--wrap"
    wrap = shlex.split(argv[-1])
    assert wrap[:2] == ["exec", "/opt/hydra bin/hydra-healthcheck"]  # quoted: a path with a space stays one word
    assert wrap[2:8] == ["--mode", "screen", "--level", "deep", "--total", "1740"]  # doctor ends a minute before the limit
    assert wrap[-1] == "/var/lib/continuum-hydra/screen/screen-$SLURM_JOB_ID.json"  # the job's own id, in the job's shell
    assert screen.result_path(PARAMS["output_dir"], "812") == "/var/lib/continuum-hydra/screen/screen-812.json"


@pytest.mark.parametrize("change, message", [
    ({"node": ""}, "node: the node's SLURM name is required"),
    ({"time_limit": 1}, "time_limit: 1 is not a whole number of minutes >= 2"),
    ({"start_timeout": -1}, "start_timeout: -1 is not a number of seconds >= 0"),
    ({"output_dir": "screen"}, "output_dir: 'screen' is not an absolute path"),
])
def test_bad_options_are_one_line(change, message):
    with pytest.raises(screen.ScreenInputError) as caught:
        screen.run(dict(PARAMS, **change))
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("recording, state, code", [
    ("scontrol-show-job-22.05-completed.txt", "COMPLETED", 0),
    ("scontrol-show-job-22.05-failed-exit-3.txt", "FAILED", 3),
    ("scontrol-show-job-22.05-timeout.txt", "TIMEOUT", 0),
    ("scontrol-show-job-22.05-cancelled-pending-drained.txt", "CANCELLED", 0),
])
def test_recorded_final_states_of_real_jobs(recording, state, code):
    job = slurm.parse_show_job(read_fixture("slurm", recording))
    assert job["state"] == state and job["exit_code"] == code and state in slurm.ENDED_STATES
    assert slurm.parse_show_job("slurm_load_jobs error: Invalid job id specified\n") is None
    assert slurm.parse_job_state("PENDING|ReqNodeNotAvail, UnavailableNodes:node2\n") == (
        "PENDING", "ReqNodeNotAvail, UnavailableNodes:node2")
    assert slurm.parse_job_state("") is None


class Replayed(screen.Slurm):
    """The SLURM commands answered from a script of squeue states (as squeue printed them), the clock moved by sleep."""

    def __init__(self, states, final=None):  # pylint: disable=super-init-not-called
        self.paths = {"squeue": "squeue"}
        self.states, self.final_job, self.cancelled, self.now = list(states), final, [], 0.0

    def state(self, job):
        return slurm.parse_job_state(self.states.pop(0) if len(self.states) > 1 else self.states[0])

    def final(self, job):
        return self.final_job

    def cancel(self, job):
        self.cancelled.append(job)

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_a_job_still_running_past_its_time_limit_is_cancelled_and_an_error():
    replay = Replayed(["PENDING|Priority", "RUNNING|None"])
    result = screen._follow(dict(PARAMS, time_limit=2), replay, "812", {"node": "gpu-a01"}, replay.clock, replay.sleep)
    assert replay.cancelled == ["812"] and result["overall_status"] == "error"
    assert result["checks"][0]["message"] == "screening job 812 still RUNNING past its time limit of 2 min; cancelled"


def test_a_job_that_ends_without_its_result_is_an_error_naming_its_state(tmp_path):
    final = slurm.parse_show_job(read_fixture("slurm", "scontrol-show-job-22.05-timeout.txt"))
    replay = Replayed(["RUNNING|None", ""], final)
    result = screen._follow(dict(PARAMS, output_dir=str(tmp_path)), replay, "2", {"node": "node1"}, replay.clock, replay.sleep)
    assert result["checks"][0]["id"] == screen.RESULT_CHECK and result["checks"][0]["status"] == "ERROR"
    assert result["checks"][0]["message"].startswith("screening job 2 ended TIMEOUT without a doctor result: ")
    assert result["screen"]["screened"] is True and result["screen"]["signal"] == 15


def test_the_result_the_job_wrote_is_read_whole_or_named_wrong(tmp_path):
    path = tmp_path / "screen-5.json"
    path.write_text(json.dumps({"checks": [], "overall_status": "healthy"}))
    assert screen.read_result(str(path))["overall_status"] == "healthy"
    path.write_text("{not json")
    with pytest.raises(screen.command.ProbeError, match="screen-5.json: not JSON"):
        screen.read_result(str(path))
    path.write_text("[1]")
    with pytest.raises(screen.command.ProbeError, match="not a doctor result"):
        screen.read_result(str(path))


def test_the_screen_mode_of_the_health_check_needs_its_output(capsys):
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor import healthcheck
    assert healthcheck.main(["--mode", "screen"], environ={}) == healthcheck.EXIT_UNJUDGED
    assert capsys.readouterr().err == ("hydra-healthcheck: ERROR: hydra-healthcheck: --mode screen needs --output PATH "
                                       "(where the screening job's result goes)\n")
