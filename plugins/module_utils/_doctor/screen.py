# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Screening on the scheduler's terms: doctor's deep level as an exclusive SLURM job on one node, its result collected.

The continuum.hydra.screen module runs this on the node itself (playbooks/screen.yml). It submits
``sbatch --exclusive -w <node>`` running the node-local health check in its screen mode (the slurm_healthcheck
role's hydra-healthcheck, a zipapp of this tree: _doctor/healthcheck.py), which writes doctor's result to a file;
waits for the job to start (at most ``start_timeout``) and to end (its time limit plus a margin); then reads the
file. The job never runs under a user's job: SLURM gives it the node only when no other job holds it, and inside
it doctor's idle guard confirms that once more. A job that does not start in time (the node stays busy, or is
drained or down) is cancelled and the node is reported not screened, never healthy.

Nothing of the wait is guessed: the job's state is squeue's, then scontrol's once it ended (_host/slurm.py); every
command has a deadline (_host/command.py).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import math
import os
import shlex
import time
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _results
from ansible_collections.continuum.hydra.plugins.module_utils._host import command, files, idle
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import ENDED_STATES, job_state_args, parse_job_state, parse_show_job
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, ERRORED

JOB_NAME = "hydra-screen"
DEFAULT_PROGRAM = "/usr/local/sbin/hydra-healthcheck"  # the slurm_healthcheck role's wrapper (its bin_dir default)
DEFAULT_OUTPUT_DIR = "/var/lib/continuum-hydra/screen"
DEFAULT_TIME_LIMIT_MIN = 60  # doctor's deep level with its default tool timeouts: 300 + 600 + 1800 + 240 s, ~49 min
DEFAULT_START_TIMEOUT_S = 600
# After the job's time limit: slurmctld's KillWait (30 s by default) and the epilog, before the job is given up on.
END_MARGIN_S = 120
# doctor's own deadline inside the job ends this much before the job's time limit, so its result is written.
DOCTOR_MARGIN_S = 60
POLL_S = 2.0
COMMAND_TIMEOUT_S = 30
# A job pending for one of these reasons will not start while the node is as it is (drained, down, the partition
# closed): waiting out start_timeout would only delay the report.
HOPELESS = ("ReqNodeNotAvail", "NodeDown", "PartitionDown", "PartitionInactive", "PartitionNodeLimit",
            "PartitionTimeLimit", "InvalidAccount", "InvalidQOS", "BadConstraints")
RESULT_CHECK = "screen.job"  # the one check of a screen that produced no doctor result (as healthcheck.run)

Clock = Callable[[], float]


class ScreenInputError(ValueError):
    """Bad options: one line naming the bad value and what is accepted."""


def validate(params: Mapping[str, Any]) -> None:
    if not params.get("node"):
        raise ScreenInputError("node: the node's SLURM name is required (hydra_slurm_node, else the inventory host's short name)")
    limit = params.get("time_limit")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
        raise ScreenInputError("time_limit: %r is not a whole number of minutes >= 2" % (limit,))
    wait = params.get("start_timeout")
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not math.isfinite(wait) or wait < 0:
        raise ScreenInputError("start_timeout: %r is not a number of seconds >= 0" % (wait,))
    if not os.path.isabs(params.get("output_dir") or ""):
        raise ScreenInputError("output_dir: %r is not an absolute path" % (params.get("output_dir"),))


def doctor_total_s(time_limit_min: int) -> float:
    """doctor's deadline inside a job of this time limit: it writes its result before SLURM kills the job."""
    return float(max(60, time_limit_min * 60 - DOCTOR_MARGIN_S))


def deadline_s(time_limit_min: int, start_timeout: float) -> float:
    """The most one screen takes: the wait to start, the job's time limit and the margin, the commands around them."""
    return float(start_timeout + time_limit_min * 60 + END_MARGIN_S + 6 * COMMAND_TIMEOUT_S)


def submit_argv(sbatch: str, params: Mapping[str, Any]) -> list[str]:
    """The sbatch command line: exclusive, on the node, its time limit; the job runs the screen mode of hydra-healthcheck,
    its result to <output_dir>/screen-<job id>.json (SLURM_JOB_ID is the job's own, expanded in the job's shell)."""
    out = params["output_dir"]
    wrap = "exec %s --mode screen --level %s --total %d --output %s/screen-\"$SLURM_JOB_ID\".json" % (
        shlex.quote(params["program"]), shlex.quote(params["level"]), doctor_total_s(params["time_limit"]), shlex.quote(out))
    argv = [sbatch, "--parsable", "--exclusive", "-w", params["node"], "-J", JOB_NAME, "-t", str(params["time_limit"]),
            "-o", os.path.join(out, "screen-%j.log"), "-D", out]
    if params.get("partition"):
        argv += ["-p", params["partition"]]
    return argv + list(params.get("sbatch_args") or []) + ["--wrap", wrap]


def result_path(output_dir: str, job_id: str) -> str:
    return os.path.join(output_dir, "screen-%s.json" % job_id)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class Slurm:
    """The SLURM commands the screen runs, each with its deadline and SLURM_CONF when one is given."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.env = {"SLURM_CONF": params["slurm_conf"]} if params.get("slurm_conf") else None
        self.paths = dict((tool, command.find_binary(tool, (params.get("paths") or {}).get(tool)))
                          for tool in ("sbatch", "squeue", "scontrol", "scancel"))
        missing = sorted(tool for tool, path in self.paths.items() if not path)
        if missing:
            raise command.ProbeAbsent("%s not found: not a SLURM submit host (install the SLURM client)" % ", ".join(missing))

    def call(self, tool: str, args: list[str]) -> tuple[int, str, str]:
        return command.run([str(self.paths[tool])] + args, COMMAND_TIMEOUT_S, env=self.env)

    def submit(self, argv: list[str]) -> str:
        rc, out, err = command.run(argv, COMMAND_TIMEOUT_S, env=self.env)
        job = out.strip().split(";", maxsplit=1)[0]  # --parsable: "<id>" or "<id>;<cluster>"
        if rc != 0 or not job.isdigit():
            raise command.ProbeError("sbatch: rc %d: %s" % (rc, " ".join((err or out).split())[:300] or "no output"))
        return job

    def state(self, job: str) -> Optional[tuple[str, str]]:
        """(state, pending reason) while squeue lists the job; None once it has left the queue."""
        rc, out, err = self.call("squeue", job_state_args(job))
        if rc != 0 and "Invalid job id" in (err + out):
            return None
        if rc != 0:
            raise command.ProbeError("squeue -j %s: rc %d: %s" % (job, rc, " ".join((err or out).split())[:300]))
        return parse_job_state(out)

    def final(self, job: str) -> Optional[dict[str, Any]]:
        rc, out, _err = self.call("scontrol", ["show", "job", job, "-o"])
        return parse_show_job(out) if rc == 0 else None

    def cancel(self, job: str) -> None:
        self.call("scancel", [job])


def _occupants(params: Mapping[str, Any], slurm: Slurm) -> str:
    """What holds the node now, for the "not screened" reason (what could not be read is said so)."""
    try:
        jobs = idle.slurm_jobs(params["node"], COMMAND_TIMEOUT_S, None, slurm.paths["squeue"]) or {}
    except (command.ProbeError, command.ProbeAbsent) as exc:
        return "its jobs could not be read: %s" % exc
    held = idle.occupants({"slurm": jobs})
    return "; ".join(held) if held else "no job holds it now"


def error_result(message: str, screen: Mapping[str, Any]) -> dict[str, Any]:
    """The result of a screen that produced no doctor result (sbatch failed, the job died): one ERROR check, never
    healthy, in the doctor result's shape so the fleet report and the gate read it like any other; ``judged`` false,
    so that screening coverage does not count the node as screened."""
    chk: dict[str, Any] = {"id": RESULT_CHECK, "title": "screening job", "category": "screen", "status": ERROR,
                           "message": message, "details": dict(screen), "remediation":
                           "read the job's log (screen.log) and the node's slurmd log; rerun playbooks/screen.yml"}
    summary = _results.summarize([chk])
    return {"schema_version": _results.SCHEMA_VERSION, "level": "deep", "checks": [chk], "summary": summary,
            "overall_status": ERRORED, "screen": dict(screen, screened=True, judged=False)}


def not_screened(reason: str, screen: Mapping[str, Any]) -> dict[str, Any]:
    """A node whose job never ran: not judged (the fleet report has it unchecked, the gate leaves it)."""
    return {"screen": dict(screen, screened=False, reason=reason), "msg": "not screened: %s" % reason}


def read_result(path: str) -> dict[str, Any]:
    """The doctor result the job wrote; ProbeError naming what is wrong with it."""
    text = files.read_required_text(path, COMMAND_TIMEOUT_S)
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise command.ProbeError("%s: not JSON (%s)" % (path, exc)) from None
    if not isinstance(document, dict) or not isinstance(document.get("checks"), list):
        raise command.ProbeError("%s: not a doctor result (no checks)" % path)
    return document


def run(params: Mapping[str, Any], check_mode: bool = False, clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Screen the node: {doctor result..., screen: {...}} when the job ran, not_screened() when it never did."""
    validate(params)
    screen: dict[str, Any] = {"node": params["node"], "job_id": None, "state": None, "submitted_at": None,
                              "started_at": None, "ended_at": None, "log": None}
    try:
        slurm = Slurm(params)
    except command.ProbeAbsent as exc:
        return error_result(str(exc), screen)
    argv = submit_argv(str(slurm.paths["sbatch"]), params)
    if check_mode:
        return not_screened("check mode: would run %s" % " ".join(shlex.quote(a) for a in argv), screen)
    try:
        os.makedirs(params["output_dir"], mode=0o700, exist_ok=True)
        job = slurm.submit(argv)
    except (OSError, command.ProbeError, command.ProbeAbsent) as exc:
        return error_result("the screening job could not be submitted: %s" % exc, screen)
    screen.update(job_id=job, submitted_at=_now(), log=os.path.join(params["output_dir"], "screen-%s.log" % job))
    try:
        return _follow(params, slurm, job, screen, clock, sleep)
    except (command.ProbeError, command.ProbeAbsent) as exc:
        slurm.cancel(job)
        return error_result("screening job %s could not be followed: %s; cancelled" % (job, exc), screen)


def _follow(params: Mapping[str, Any], slurm: Slurm, job: str, screen: dict[str, Any], clock: Clock,
            sleep: Callable[[float], None]) -> dict[str, Any]:
    start_by = clock() + float(params["start_timeout"])
    state = slurm.state(job)
    while state is not None and state[0] == "PENDING":
        hopeless = [word for word in HOPELESS if state[1].startswith(word)]
        if hopeless or clock() >= start_by:
            slurm.cancel(job)
            why = "the node cannot take it (%s)" % state[1] if hopeless else \
                "it did not start within %g s (%s; %s)" % (float(params["start_timeout"]), state[1], _occupants(params, slurm))
            return not_screened("node %s: screening job %s %s; cancelled" % (params["node"], job, why), dict(screen, state="CANCELLED"))
        sleep(POLL_S)
        state = slurm.state(job)
    screen["started_at"] = _now()
    end_by = clock() + params["time_limit"] * 60 + END_MARGIN_S
    while state is not None and state[0] not in ENDED_STATES:
        if clock() >= end_by:
            slurm.cancel(job)
            return error_result("screening job %s still %s past its time limit of %d min; cancelled" % (
                job, state[0], params["time_limit"]), dict(screen, state=state[0]))
        sleep(POLL_S)
        state = slurm.state(job)
    final = slurm.final(job) or {}
    screen.update(state=final.get("state") or (state[0] if state else None), ended_at=_now(),
                  exit_code=final.get("exit_code"), signal=final.get("signal"))
    path = result_path(params["output_dir"], job)
    try:
        result = read_result(path)
    except (command.ProbeError, command.ProbeAbsent) as exc:
        return error_result("screening job %s ended %s without a doctor result: %s" % (job, screen["state"] or "(state unknown)", exc),
                            screen)
    screen["result"] = path
    result["screen"] = dict(screen, screened=True)
    return result
