# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The node-local SLURM health check: doctor's checks run on a compute node without Ansible.

``hydra-healthcheck`` (installed by the slurm_healthcheck role as a zipapp of this module_utils tree) is what
slurm.conf's HealthCheckProgram, Prolog or Epilog runs. It runs doctor at a level, turns the result into an exit
code (0 healthy, 1 unhealthy, 2 could not judge: the convention of NVIDIA's and DeepOps' validators), drains its
own node on FAIL (and on ERROR only when ``drain_on_error``) with ``scontrol update nodename=$SLURMD_NODENAME
state=drain reason="hydra: <check>: <message>"``, and writes the last result as JSON for the next doctor run
(check slurm.healthcheck) and the fleet report.

Drain policy: never resume; never touch a node that is already drained (by an admin: its reason is kept; by hydra:
it stays drained); a node whose state cannot be read is not drained. Resuming hydra's drains is the controller's
job (the slurm_gate role), where the brake is. In prolog and epilog modes scontrol is never called: a failing
prolog or epilog makes SLURM drain the node itself (and requeue the job held, for a prolog).

The first part is pure (config -> options, result -> decision -> record); main() at the end does the I/O, every
command through _host.command with a deadline.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import argparse
import datetime
import json
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _atomic, _results
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels, state
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor_run
from ansible_collections.continuum.hydra.plugins.module_utils._host import command, files
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import MAX_REASON_CHARS, REASON_PREFIX, drain_args, is_hydra_reason, parse_show_node
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, ERRORED, FAIL, SKIP, STATUSES

# Exit codes (NVIDIA's health validation and DeepOps' validators: 0 pass, 1 fail, 2 could not judge).
EXIT_HEALTHY = 0
EXIT_UNHEALTHY = 1
EXIT_UNJUDGED = 2

# Modes: how the program was started. Only the health check mode calls scontrol. SCREEN is the screening job's
# (playbooks/screen.yml, _doctor/screen.py): doctor at level deep inside an exclusive job, its result written to
# --output for the job's submitter to collect; it never drains (the slurm_gate role decides from the fleet report).
HEALTHCHECK = "healthcheck"
PROLOG = "prolog"
EPILOG = "epilog"
SCREEN = "screen"
MODES = (HEALTHCHECK, PROLOG, EPILOG, SCREEN)

# What decide() did about the node.
DRAINED = "drained"
NONE = "none"  # nothing to do: healthy, warning, or an ERROR with drain_on_error off
LEFT_ADMIN_DRAIN = "left_admin_drain"  # drained by someone else: never touched
LEFT_HYDRA_DRAIN = "left_hydra_drain"  # drained by hydra earlier: stays drained (slurm_gate resumes)
NOT_DRAINED = "not_drained"  # should drain, could not (no node name, state unreadable, scontrol failed, dry run)
EXIT_ONLY = "exit_only"  # prolog/epilog: the exit code is the action, SLURM drains

DEFAULT_CONFIG_PATH = "/etc/continuum-hydra/healthcheck.json"
# slurmd kills the HealthCheckProgram after 60 s (a fixed limit up to Slurm 25.11; HealthCheckTimeout from 26.05, which
# the slurm_healthcheck role then turns into timeouts.total): doctor's whole run and the two scontrol calls fit in that.
DEFAULT_TOTAL_TIMEOUT = 40
DEFAULT_SCONTROL_TIMEOUT = 5
CONFIG_READ_TIMEOUT = 5

# This check reads the file this program writes: judging the node by its own last verdict would keep a node
# unhealthy for good, so the program never runs it.
OWN_CHECK = "slurm.healthcheck"

DEFAULTS: dict[str, Any] = {
    "level": levels.QUICK,
    "only": [],
    "exclude": [],
    "expect": {},
    "timeouts": {},
    "drain_on_error": False,
    "state_dir": state.DEFAULT_STATE_DIR,  # the last result goes to <state_dir>/healthcheck/last.json
    "scontrol_path": None,
    "nvidia_smi_path": None,
    "scontrol_timeout": DEFAULT_SCONTROL_TIMEOUT,
}
_KINDS: dict[str, tuple[type, ...]] = {
    "level": (str,), "only": (list,), "exclude": (list,), "expect": (dict,), "timeouts": (dict,), "drain_on_error": (bool,),
    "state_dir": (str,), "scontrol_path": (str, type(None)), "nvidia_smi_path": (str, type(None)),
    "scontrol_timeout": (int, float),
}


class ConfigError(ValueError):
    """A bad config file or option: one line naming the bad value and what is accepted."""


# ---------------------------------------------------------------- config (pure)

def parse_config(text: str, source: str = DEFAULT_CONFIG_PATH) -> dict[str, Any]:
    """The config file's JSON text -> DEFAULTS updated with it; ConfigError naming the first bad value."""
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise ConfigError("%s: not JSON (%s)" % (source, exc)) from None
    if not isinstance(given, dict):
        raise ConfigError("%s: a JSON object is expected, got %s" % (source, type(given).__name__))
    return normalize_config(given, source)


def normalize_config(given: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    config = dict(DEFAULTS)
    for key, value in given.items():
        if key not in _KINDS:
            raise ConfigError("%s: unknown key %r; accepted: %s" % (source, key, ", ".join(sorted(_KINDS))))
        if not isinstance(value, _KINDS[key]) or (isinstance(value, bool) and bool not in _KINDS[key]):
            raise ConfigError("%s: %s: %r is not a %s" % (source, key, value, " or ".join(k.__name__ for k in _KINDS[key])))
        config[key] = value
    if not levels.is_level(config["level"]):
        raise ConfigError("%s: level: %r is not a level; accepted: %s" % (source, config["level"], ", ".join(levels.LEVELS)))
    for key in ("only", "exclude"):
        if not all(isinstance(item, str) for item in config[key]):
            raise ConfigError("%s: %s: %r is not a list of check ids (strings)" % (source, key, config[key]))
    for name, value in config["timeouts"].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isfinite(value):
            raise ConfigError("%s: timeouts.%s: %r is not a positive number of seconds" % (source, name, value))
    if not math.isfinite(config["scontrol_timeout"]) or config["scontrol_timeout"] <= 0:
        raise ConfigError("%s: scontrol_timeout: %r is not a positive number of seconds" % (source, config["scontrol_timeout"]))
    if not os.path.isabs(config["state_dir"]):
        raise ConfigError("%s: state_dir: %r is not an absolute path" % (source, config["state_dir"]))
    return config


def doctor_options(config: Mapping[str, Any], total: Optional[float] = None) -> dict[str, Any]:
    """doctor run()'s keyword arguments: the config's, with slurm.healthcheck always left out and a total deadline
    (``total`` when given: the screening job's, within its time limit; else the config's, else one that fits slurmd's
    60 s)."""
    timeouts = dict(config["timeouts"])
    if total is not None:
        timeouts["total"] = total
    timeouts.setdefault("total", DEFAULT_TOTAL_TIMEOUT)
    return {"only": list(config["only"]) or None, "exclude": list(config["exclude"]) + [OWN_CHECK],
            "expect": dict(config["expect"]), "timeouts": timeouts, "nvidia_smi_path": config["nvidia_smi_path"],
            "level": config["level"]}


# ---------------------------------------------------------------- decision (pure)

def exit_code(result: Mapping[str, Any]) -> int:
    """0 healthy (PASS, WARN, SKIP), 1 some check FAIL, 2 no FAIL but some check ERROR (could not judge), or no
    check judged anything (none ran, every one SKIP, or a status that is not one of _status.STATUSES)."""
    statuses = [chk.get("status") for chk in result.get("checks") or []]
    if FAIL in statuses:
        return EXIT_UNHEALTHY
    if ERROR in statuses or not statuses or all(status == SKIP for status in statuses) \
            or any(status not in STATUSES for status in statuses):
        return EXIT_UNJUDGED  # a run that judged nothing is never healthy
    return EXIT_HEALTHY


def sanitize(text: Any) -> str:
    """One line of printable ASCII without quotes or brackets: safe in a SLURM reason and in `sinfo -R`."""
    text = str(text)
    text = re.sub(r"[\"'`]", "", text)
    text = text.replace("[", "(").replace("]", ")")
    text = "".join(ch if 32 <= ord(ch) < 127 else " " for ch in text)
    return " ".join(text.split())


# A GPU's UUID in a check's message (_results.gpu_name): 40 of the reason's 120 characters, and the report has it.
_UUID = re.compile(r" ?\b(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")


def reason_text(result: Mapping[str, Any], status: str = FAIL) -> str:
    """``hydra: <check>: <message>`` for the first check with ``status``, ``(+N more)`` when others have it too;
    at most MAX_REASON_CHARS, sanitised, GPU UUIDs left out (the GPU's index and address stay)."""
    matching = [chk for chk in result.get("checks") or [] if chk.get("status") == status]
    if not matching:
        return "%s %s" % (REASON_PREFIX, "could not judge: no check judged the node" if status == ERROR else "no %s check reported" % status)
    first = matching[0]
    head = "%s %s: " % (REASON_PREFIX, sanitize(first.get("id") or "unknown"))
    if status == ERROR:
        head += "could not judge: "
    tail = " (+%d more)" % (len(matching) - 1) if len(matching) > 1 else ""
    message = sanitize(_UUID.sub("", first.get("message") or "") or "no message")
    room = MAX_REASON_CHARS - len(head) - len(tail)
    if len(message) > room:
        message = message[:max(0, room - 3)].rstrip() + "..."
    return (head + message + tail)[:MAX_REASON_CHARS]


def wants_drain(code: int, config: Mapping[str, Any]) -> bool:
    return code == EXIT_UNHEALTHY or (code == EXIT_UNJUDGED and bool(config["drain_on_error"]))


def decide(result: Mapping[str, Any], config: Mapping[str, Any], mode: str, node_name: Optional[str],
           node: Optional[Mapping[str, Any]], node_error: Optional[str] = None) -> dict[str, Any]:
    """What to do: {exit_code, action, reason, why}. ``node`` is parse_show_node()'s entry for the node, its state before any change
    (None with ``node_error`` when it could not be read). action DRAINED here means "drain it now"."""
    code = exit_code(result)
    drain = wants_drain(code, config)
    reason = reason_text(result, FAIL if code == EXIT_UNHEALTHY else ERROR) if drain else None
    if mode != HEALTHCHECK:
        # A failing prolog/epilog drains the node (SLURM's own reason); an ERROR fails it only with drain_on_error.
        code = code if code == EXIT_HEALTHY or drain else EXIT_HEALTHY
        return {"exit_code": code, "action": EXIT_ONLY if drain else NONE, "reason": reason,
                "why": "%s: exit %d%s" % (mode, code, ", SLURM drains the node" if drain else "")}
    if not drain:
        why = "no check failed" if code == EXIT_HEALTHY else "could not judge; drain_on_error is off"
        if node and node["drained"] and is_hydra_reason(node["reason"]) and code == EXIT_HEALTHY:
            why += "; the node stays drained (%s): resuming is the slurm_gate role's job" % node["reason"]
        return {"exit_code": code, "action": NONE, "reason": None, "why": why}
    if not node_name:
        return {"exit_code": code, "action": NOT_DRAINED, "reason": reason,
                "why": "SLURMD_NODENAME is not set and no --node was given: cannot drain"}
    if node is None:
        return {"exit_code": code, "action": NOT_DRAINED, "reason": reason,
                "why": "node %s: state unreadable (%s): not drained" % (node_name, node_error or "no such node")}
    if node["state"].split("+")[0] == "UNKNOWN":
        return {"exit_code": code, "action": NOT_DRAINED, "reason": reason,
                "why": "node %s: state %s (unreadable): not drained" % (node_name, node["state"])}
    if (node["drained"] or node["reason"]) and not is_hydra_reason(node["reason"]):
        # Drained, down or failed by someone else (an admin, slurmctld): draining would replace their reason.
        return {"exit_code": code, "action": LEFT_ADMIN_DRAIN, "reason": reason,
                "why": "node %s is already drained by someone else (%s): left alone" % (node_name, node["reason"])}
    if node["drained"]:
        return {"exit_code": code, "action": LEFT_HYDRA_DRAIN, "reason": reason,
                "why": "node %s is already drained by hydra (%s)" % (node_name, node["reason"])}
    return {"exit_code": code, "action": DRAINED, "reason": reason, "why": "drain node %s: %s" % (node_name, reason)}


def record(result: Mapping[str, Any], decision: Mapping[str, Any], mode: str, node_name: Optional[str],
           drained: bool, at: str) -> dict[str, Any]:
    """last.json: the doctor host result plus {exit_code, drained, reason, at, mode, node, action, why}."""
    out = dict(result)
    out.update({"exit_code": decision["exit_code"], "drained": drained, "reason": decision["reason"], "at": at,
                "mode": mode, "node": node_name, "action": decision["action"], "why": decision["why"]})
    return out


def error_result(message: str) -> dict[str, Any]:
    """The record of a run that produced no doctor result (bad config, a crash): one ERROR check."""
    chk: dict[str, Any] = {"id": "healthcheck.run", "title": "node-local health check", "category": "healthcheck",
                           "status": ERROR, "message": message, "details": {}, "remediation": None}
    return {"checks": [chk], "summary": _results.summarize([chk]), "overall_status": ERRORED}


# ---------------------------------------------------------------- the program (I/O)

def _arguments(argv: Sequence[str]) -> dict[str, Any]:
    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # one line, exit 2: "could not judge"
            raise ConfigError("hydra-healthcheck: %s" % message)

    parser = Parser(prog="hydra-healthcheck", description="doctor's checks for slurm.conf HealthCheckProgram/Prolog/Epilog")
    parser.add_argument("--config", default=DEFAULT_CONFIG_PATH)
    parser.add_argument("--mode", choices=MODES, default=HEALTHCHECK)
    parser.add_argument("--level", choices=levels.LEVELS, default=None, help="overrides the config's level")
    parser.add_argument("--node", default=None, help="SLURM node name when SLURMD_NODENAME is not set")
    parser.add_argument("--dry-run", action="store_true", help="decide and print, drain nothing, write nothing")
    parser.add_argument("--output", default=None, help="screen mode: where the result is written (JSON)")
    parser.add_argument("--total", type=float, default=None, help="screen mode: doctor's whole deadline, seconds")
    args = vars(parser.parse_args(list(argv)))
    if args["mode"] == SCREEN and not args["output"]:
        raise ConfigError("hydra-healthcheck: --mode screen needs --output PATH (where the screening job's result goes)")
    if args["total"] is not None and not (math.isfinite(args["total"]) and args["total"] > 0):
        raise ConfigError("hydra-healthcheck: --total: %r is not a positive number of seconds" % args["total"])
    return args


def _scontrol(config: Mapping[str, Any], args: Sequence[str]) -> str:
    binary = command.find_binary("scontrol", config["scontrol_path"])
    if not binary:
        raise command.ProbeError("scontrol: not found (%s)" % (config["scontrol_path"] or "not on PATH"))
    rc, stdout, stderr = command.run([binary] + list(args), config["scontrol_timeout"])
    if rc != 0:
        raise command.ProbeError("scontrol %s: rc %d: %s" % (" ".join(args[:2]), rc, sanitize(stderr or stdout)[:200]))
    return stdout


def main(argv: Sequence[str], environ: Optional[Mapping[str, str]] = None) -> int:
    """Run the health check; print one line; return the exit code. Never raises for bad input."""
    environ = os.environ if environ is None else environ
    at = datetime.datetime.now(datetime.timezone.utc).isoformat()
    try:
        args = _arguments(argv)
        config = parse_config(files.read_text(args["config"], CONFIG_READ_TIMEOUT), args["config"])
    except (ConfigError, command.ProbeAbsent, command.ProbeError) as exc:
        sys.stderr.write("hydra-healthcheck: ERROR: %s\n" % (exc if isinstance(exc, ConfigError) else "config: %s" % exc))
        return EXIT_UNJUDGED
    if args["level"]:
        config["level"] = args["level"]
    mode, node_name = args["mode"], environ.get("SLURMD_NODENAME") or args["node"]
    if mode == SCREEN:
        return screen(args, config, node_name, environ, at)
    try:
        result = doctor_run.run(**doctor_options(config))
    except doctor_run.DoctorInputError as exc:
        result = error_result("config %s: %s" % (args["config"], exc))
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # Never a traceback from a HealthCheckProgram: say what broke and exit "could not judge".
        result = error_result("doctor crashed: %s: %s" % (type(exc).__name__, exc))
    node, node_error = None, None
    if mode == HEALTHCHECK and node_name and wants_drain(exit_code(result), config):
        try:
            node = parse_show_node(_scontrol(config, ["show", "node", node_name, "-o"])).get(node_name)
        except command.ProbeAbsent as exc:
            node_error = str(exc)
        except command.ProbeError as exc:
            node_error = str(exc)
    decision = decide(result, config, mode, node_name, node, node_error)
    drained = False
    if decision["action"] == DRAINED and args["dry_run"]:
        decision = dict(decision, action=NOT_DRAINED, why="dry run: would %s" % decision["why"])
    elif decision["action"] == DRAINED and node_name:
        try:
            _scontrol(config, drain_args(node_name, decision["reason"]))
            drained = True
        except (command.ProbeAbsent, command.ProbeError) as exc:
            decision = dict(decision, action=NOT_DRAINED, why="drain failed: %s" % exc)
    sys.stdout.write("hydra-healthcheck: exit %d: %s\n" % (decision["exit_code"], decision["why"]))
    if exit_code(result) == EXIT_UNJUDGED:
        # Say why nothing was judged (a bad config value, a hung tool, every check skipped) on one line.
        first = next((chk for chk in result.get("checks") or [] if chk.get("status") == ERROR), None)
        sys.stderr.write("hydra-healthcheck: could not judge: %s\n" % (
            "%s: %s" % (first.get("id"), sanitize(first.get("message"))) if first else "no check judged the node"))
    if not args["dry_run"]:
        path = state.healthcheck_last(config["state_dir"])
        problem = write_last(path, json.dumps(record(result, decision, mode, node_name, drained, at), indent=1, sort_keys=True))
        if problem:
            sys.stderr.write("hydra-healthcheck: %s\n" % problem)
    return int(decision["exit_code"])


def screen(args: Mapping[str, Any], config: Mapping[str, Any], node_name: Optional[str], environ: Mapping[str, str],
           at: str) -> int:
    """The screening job's run: doctor at level deep (or --level) on this node, its idle guard told the node's name
    (the job itself is left out by SLURM_JOB_ID), the result written to --output. Never drains, never writes last.json."""
    if not args["level"]:
        config = dict(config, level=levels.DEEP)
    try:
        result = doctor_run.run(slurm_node=node_name, **doctor_options(config, args["total"]))
    except doctor_run.DoctorInputError as exc:
        result = error_result("config %s: %s" % (args["config"], exc))
    except Exception as exc:  # pylint: disable=broad-exception-caught
        result = error_result("doctor crashed: %s: %s" % (type(exc).__name__, exc))
    code = exit_code(result)
    document = dict(result, exit_code=code, mode=SCREEN, node=node_name, at=at, job_id=environ.get("SLURM_JOB_ID"))
    try:
        _atomic.write_atomic(args["output"], json.dumps(document, indent=1, sort_keys=True))
    except OSError as exc:
        sys.stderr.write("hydra-healthcheck: cannot write %s: %s\n" % (args["output"], exc.strerror or exc))
        return EXIT_UNJUDGED
    sys.stdout.write("hydra-healthcheck: screen: exit %d: %s, result in %s\n" % (code, result.get("overall_status"), args["output"]))
    return code


def write_last(path: str, text: str) -> Optional[str]:
    """Write last.json atomically. When that fails the previous record must not stay: it may say healthy about a node
    this run judged FAIL and drained. It is removed and the write tried once more (a full disk has room again); where
    it cannot be removed it is emptied in place (check slurm.healthcheck reads no record there, an ERROR, never a
    PASS). Returns None when written at once, else one line saying what happened."""
    try:
        _atomic.write_atomic(path, text)
        return None
    except OSError as exc:
        failed = "cannot write %s: %s" % (path, exc.strerror or exc)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return "%s (there was no previous record)" % failed
    except OSError:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC))
        except OSError as exc:
            return "%s; the previous record could not be removed or emptied either (%s): check slurm.healthcheck may " \
                   "read a stale verdict there" % (failed, exc.strerror or exc)
        return "%s; emptied the previous record in place (check slurm.healthcheck is ERROR until one is written)" % failed
    try:
        _atomic.write_atomic(path, text)
    except OSError as exc:
        return "%s; removed the previous record (check slurm.healthcheck SKIPs until one is written): %s" % (
            failed, exc.strerror or exc)
    return "%s; removed the previous record, then wrote this run's" % failed
