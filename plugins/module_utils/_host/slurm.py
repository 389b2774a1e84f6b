# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""SLURM node state as scontrol shows it, the scontrol arguments that drain or resume a node, and the jobs squeue
lists on a node.

Shared by the slurm_gate role (which drains and resumes from the controller) and the node-local health check
(which only drains its own node): both write reasons starting with REASON_PREFIX, and only such drains are
ever resumed by hydra. doctor's idle guard (_host/idle.py) and the screening job (_doctor/screen.py) read the jobs a
node runs and submit, follow and cancel jobs with the arguments below.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from typing import Any, Optional

# Every drain reason hydra writes starts with this; only such drains are ever resumed by hydra.
REASON_PREFIX = "hydra:"
# SLURM stores reasons of any length, but `sinfo -R` shows the start: keep it readable.
MAX_REASON_CHARS = 120

_NODE_NAME = re.compile(r"(?:^|\s)NodeName=(\S+)")
_STATE = re.compile(r"\sState=(\S+)")
# scontrol ends a reason with " [user@time]"; the reason itself may hold spaces and '='.
_REASON = re.compile(r"\sReason=(.*?)(?: \[[^\[\]@]*@[^\[\]]*\])?\s*$")
_NO_REASON = ("", "none", "(null)")

Node = dict[str, Any]  # parse_show_node(): {state, flags, drained, reason}


def parse_show_node(text: str) -> dict[str, Node]:
    """`scontrol show node [NAME] -o` text -> {node: {"state", "flags", "drained", "reason"}}.

    22.05 has no `scontrol --json`; one line per node, with State=BASE+FLAG+FLAG and Reason= last. Lines without
    NodeName= ("Node node9 not found") are not nodes.
    """
    nodes = {}
    for line in text.splitlines():
        name = _NODE_NAME.search(line)
        if not name:
            continue
        state = _STATE.search(line)
        reason = _REASON.search(line)
        parts = (state.group(1) if state else "UNKNOWN").split("+")
        value = reason.group(1).strip() if reason else ""
        nodes[name.group(1)] = {
            "state": "+".join(parts),
            "flags": parts[1:],
            # DRAIN on an idle node, DRAINING/DRAINED in older spellings of the same flag.
            "drained": any(p.startswith("DRAIN") for p in parts),
            "reason": value if value not in _NO_REASON else None,
        }
    return nodes


def is_hydra_reason(reason: Optional[str]) -> bool:
    return reason is not None and reason.startswith(REASON_PREFIX)


def drain_args(node: str, reason: str) -> list[str]:
    """scontrol arguments that drain the node (an argument list: the reason needs no quoting)."""
    return ["update", "nodename=%s" % node, "state=drain", "reason=%s" % reason]


def resume_args(node: str) -> list[str]:
    return ["update", "nodename=%s" % node, "state=resume"]


# Job states in which a job holds a node (squeue -t): a node with one of these is not idle.
HOLDING_STATES = ("RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING")
# squeue's output: one line per job, the name last (a job name may hold the separator).
_SQUEUE_FORMAT = "%i|%T|%u|%j"


def node_jobs_args(node: str) -> list[str]:
    """squeue arguments listing the jobs that hold ``node``: one line per job, ``id|state|user|name``."""
    return ["-h", "-w", node, "-t", ",".join(HOLDING_STATES), "-o", _SQUEUE_FORMAT]


def parse_node_jobs(text: str) -> list[dict[str, Any]]:
    """node_jobs_args() output -> [{"id", "state", "user", "name"}]; a line without the four fields is not a job."""
    jobs = []
    for line in text.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4 and parts[0]:
            jobs.append({"id": parts[0], "state": parts[1], "user": parts[2], "name": parts[3]})
    return jobs


# A job's states once it has ended (squeue no longer lists it; scontrol show job keeps it for MinJobAge, 300 s).
ENDED_STATES = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
                "DEADLINE")
_JOB_FIELD = re.compile(r"(?:^|\s)(JobId|JobName|JobState|Reason|ExitCode|StartTime|EndTime|NodeList|StdOut)=(\S*)")


def job_state_args(job_id: str) -> list[str]:
    """squeue arguments for one job's state and pending reason, ``STATE|REASON``; nothing once it has left the queue."""
    return ["-h", "-j", job_id, "-o", "%T|%r"]


def parse_job_state(text: str) -> Optional[tuple[str, str]]:
    """job_state_args() output -> (state, reason); None when squeue no longer lists the job."""
    for line in text.splitlines():
        state, _sep, reason = line.strip().partition("|")
        if state:
            return state, reason
    return None


def parse_show_job(text: str) -> Optional[dict[str, Any]]:
    """`scontrol show job ID -o` -> {id, name, state, reason, exit_code, signal, start, end, nodes, stdout}; None
    without a JobId (the job is no longer known: "Invalid job id specified"). ExitCode is ``rc:signal``."""
    fields = dict(_JOB_FIELD.findall(text.splitlines()[0] if text.strip() else ""))
    if "JobId" not in fields:
        return None
    code, _sep, signal = fields.get("ExitCode", "").partition(":")
    return {"id": fields["JobId"], "name": fields.get("JobName"), "state": fields.get("JobState"),
            "reason": (fields.get("Reason") or "").replace("_", " ") or None,
            "exit_code": int(code) if code.isdigit() else None, "signal": int(signal) if signal.isdigit() else None,
            "start": fields.get("StartTime"), "end": fields.get("EndTime"), "nodes": fields.get("NodeList"),
            "stdout": fields.get("StdOut")}
