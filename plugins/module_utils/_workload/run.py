# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Running selected catalogue models: on the host or in a container, one result row per model (or CSV row).

As madengine does it: the script's whole directory is copied into a fresh ``run_directory`` under a workspace
and the script runs there (``.sh``/``.slurm`` with bash, ``.py`` with Python, anything else is a directory whose
``run.sh`` runs) with the model's args; the log is searched for ``performance: <number> <metric>``, or a
``multiple_results`` CSV (columns model, performance, metric) gives one row per line named
``<model>_<row model>``. Each model is its own row whatever the others do: a non-zero exit, a missing result or an
error pattern in the log is FAILURE, the deadline is TIMEOUT (madengine says FAILURE), a model asking for more
GPUs than the host has is SKIPPED. The workspace is a temporary directory, removed afterwards.

Nothing runs on a busy node: before the first model, the idle guard (_host/idle.py guard()) reads the node's GPU
compute processes and the SLURM jobs holding it; while something does (or it cannot be read), every selected model is
SKIPPED naming it, unless ``force``.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import ast
import csv
import datetime
import glob
import json
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import open_log
from ansible_collections.continuum.hydra.plugins.module_utils._host import idle, telemetry
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, find_binary, run, run_to_file
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import count_gpus
from ansible_collections.continuum.hydra.plugins.module_utils._status import RUN_FAILURE, RUN_SKIPPED, RUN_STATUSES, RUN_SUCCESS, RUN_TIMEOUT
from ansible_collections.continuum.hydra.plugins.module_utils._workload import phases as phases_helper
from ansible_collections.continuum.hydra.plugins.module_utils._workload.catalogue import Catalogue, describe, resolve_timeout, split_tags

RUNTIMES = ("host", "docker", "podman", "auto")
ENGINES = ("docker", "podman")

# madengine's performance line: "performance:", whitespace, a number, an optional ",", "/unit" or both, whitespace,
# then the metric up to the next whitespace or comma (HEAD deployment/base.py PERFORMANCE_LOG_PATTERN semantics).
PERFORMANCE_LINE = re.compile(
    r"performance:\s+([+\-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+\-]?[0-9]+)?)(?:,?\s*/[a-zA-Z]+\s*,?|,)?\s+([^\s,]+)")
# Fallback madengine accepts: a HuggingFace Trainer summary.
HF_SAMPLES_LINE = re.compile(r"train_samples_per_second['\"\s:=]+([0-9]+(?:\.[0-9]*)?(?:[eE][+\-]?[0-9]+)?)")
# madengine's default log error patterns: any of them in the log fails a run that printed a performance.
ERROR_PATTERNS = ("OutOfMemoryError", "HIP out of memory", "CUDA out of memory", "RuntimeError:", "AssertionError:",
                  "ValueError:", "SystemExit", "failed (exitcode:", "Traceback (most recent call last)", "FAILED",
                  "Exception:", "ImportError:", "ModuleNotFoundError:")
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_CONTEXT_LINE = re.compile(r"^#\s*CONTEXT\s+(\{.*\})\s*$")
LOG_LINE_MAX = 400
TAIL_READ_BYTES = 256 * 1024


class WorkloadError(Exception):
    """An option or the host makes the whole run impossible; the message is one line."""


# ---------------------------------------------------------------------------------------------
# Pure parsing


def parse_performance(log_text: str) -> Optional[tuple[str, str]]:
    """(value, metric) of the first performance line, else of a HuggingFace train_samples_per_second; None if neither."""
    match = PERFORMANCE_LINE.search(log_text)
    if match:
        return match.group(1), match.group(2)
    match = HF_SAMPLES_LINE.search(log_text)
    if match:
        return match.group(1), "samples_per_second"
    return None


def performance_problem(value: Optional[str]) -> Optional[str]:
    """Why a printed performance is no measurement (empty, not a number, NaN, infinite, negative), None when it is one."""
    if not value:
        return "empty performance"
    try:
        number = float(value)
    except ValueError:
        return "performance %r is not a number" % value[:40]
    if not math.isfinite(number) or number < 0:
        return "performance %r is not a finite number >= 0" % value[:40]
    return None


def find_error_pattern(log_text: str, patterns: Sequence[str] = ERROR_PATTERNS) -> Optional[str]:
    """The first error pattern found in the log (the pattern and its line), None when clean."""
    for line in log_text.splitlines():
        for pattern in patterns:
            if pattern in line:
                return "%s (in: %s)" % (pattern, clean_line(line)[:200])
    return None


def clean_line(line: str) -> str:
    """A log line fit for a result: terminal escapes and control characters removed, length bounded."""
    line = line.rstrip("\r\n").rsplit("\r", 1)[-1]  # a progress bar redrawn with CR: its last state
    line = _CONTROL.sub("", _ANSI.sub("", line))
    return line if len(line) <= LOG_LINE_MAX else line[:LOG_LINE_MAX] + "..."


def log_tail(data: bytes, lines: int) -> list[str]:
    """The last ``lines`` lines of a log, decoded (invalid UTF-8 replaced) and cleaned."""
    if lines <= 0:
        return []
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    # Split on newlines only: a carriage return redraws a line (progress bars), clean_line keeps its last state.
    return [clean_line(line) for line in text.split("\n")[-lines:]] if text else []


def parse_multiple_results(text: str) -> tuple[Optional[list[dict[str, str]]], Optional[str]]:
    """Rows of a multiple_results CSV (keys stripped) or (None, why it is unusable), madengine's rules."""
    reader = csv.DictReader(text.splitlines())
    try:
        if reader.fieldnames is None:
            return None, "the CSV is empty"
        reader.fieldnames = [name.strip() for name in reader.fieldnames]
        missing = [name for name in ("model", "performance", "metric") if name not in reader.fieldnames]
        if missing:
            return None, "the CSV has no %s column" % ", ".join(missing)
        rows = [{key: (value or "").strip() for key, value in row.items() if key is not None} for row in reader]
    except csv.Error as exc:
        return None, "the CSV cannot be read: %s" % exc
    if not any(row.get("performance") for row in rows):
        return None, "no row of the CSV has a performance value"
    return rows, None


# ---------------------------------------------------------------------------------------------
# Commands


def script_command(scripts: str, args: str, python: str) -> tuple[str, list[str]]:
    """(directory to copy, argv run inside it) for a model's ``scripts`` value, as madengine runs it."""
    if scripts.endswith((".sh", ".slurm")):
        return os.path.dirname(scripts), ["bash", os.path.basename(scripts)] + shlex.split(args)
    if scripts.endswith(".py"):
        return os.path.dirname(scripts), [python, os.path.basename(scripts)] + shlex.split(args)
    return scripts, ["bash", "run.sh"] + shlex.split(args)


def dockerfile_context(text: str) -> dict[str, Any]:
    """The ``# CONTEXT {...}`` dictionary in a Dockerfile's first 5 lines ({} when none)."""
    for line in text.splitlines()[:5]:
        match = _CONTEXT_LINE.match(line.strip())
        if match:
            try:
                value = ast.literal_eval(match.group(1))
            except (ValueError, SyntaxError):
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def matching_dockerfiles(candidates: Mapping[str, str], context: Mapping[str, Any]) -> list[str]:
    """Dockerfile paths (path -> text) kept for a run context: every CONTEXT key also in the context must agree."""
    kept = []
    for path in sorted(candidates):
        wanted = dockerfile_context(candidates[path])
        if all(context[key] == value for key, value in wanted.items() if key in context):
            kept.append(path)
    return kept


def gpu_flags(engine: str, vendor: Optional[str]) -> list[str]:
    """The container engine arguments that pass the host's GPUs through."""
    if vendor == "AMD":
        return ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video",
                "--security-opt", "seccomp=unconfined"]
    if vendor == "NVIDIA":
        # podman reaches NVIDIA GPUs through CDI (nvidia-ctk cdi generate); docker through the NVIDIA runtime.
        return ["--device", "nvidia.com/gpu=all"] if engine == "podman" else ["--gpus", "all"]
    return []


def build_argv(engine: str, dockerfile: str, tag: str, context_dir: str) -> list[str]:
    return [engine, "build", "--network", "host", "-f", dockerfile, "-t", tag, context_dir]


def container_run_argv(engine: str, image: str, workspace: str, command: Sequence[str], env: Mapping[str, str],
                       vendor: Optional[str], name: str) -> list[str]:
    """``<engine> run`` for one model: workspace mounted at /myworkspace, run in its run_directory, GPUs passed."""
    argv = [engine, "run", "--rm", "--name", name, "--network", "host", "--ipc", "host", "--shm-size", "16G"]
    argv += gpu_flags(engine, vendor)
    argv += ["-v", "%s:/myworkspace" % workspace, "-w", "/myworkspace/run_directory"]
    for key in sorted(env):
        argv += ["-e", "%s=%s" % (key, env[key])]
    return argv + [image] + list(command)


def pick_runtime(requested: str, has_dockerfile: bool, engine_ok: Callable[[str], bool]) -> str:
    """host, docker or podman: ``auto`` takes the first engine that answers when the model has a Dockerfile."""
    if requested != "auto":
        return requested
    if has_dockerfile:
        for engine in ENGINES:
            if engine_ok(engine):
                return engine
    return "host"


ENGINE_CHECK_TIMEOUT_S = 10.0  # `<engine> info`
CONTAINER_RM_TIMEOUT_S = 60  # removing a container killed at its model's deadline
# What a model's run may take besides its own limit: asking each engine whether it answers, and that removal.
PER_MODEL_SLACK_S = len(ENGINES) * ENGINE_CHECK_TIMEOUT_S + CONTAINER_RM_TIMEOUT_S
# The idle guard before the first model: nvidia-smi, the KFD tree and squeue, each within its own deadline.
IDLE_GUARD_S = 3 * idle.DEFAULT_TIMEOUT_S


def deadline_s(limits: Sequence[Optional[float]]) -> Optional[float]:
    """The most a run of models with these limits takes (``mode: discover``'s ``timeout`` per model, in seconds):
    the idle guard, then each model's limit plus PER_MODEL_SLACK_S. None when a model has no limit (timeout 0): the
    run has none either."""
    if any(limit is None for limit in limits):
        return None
    guard = IDLE_GUARD_S if limits else 0.0
    return guard + float(sum(float(limit) + PER_MODEL_SLACK_S for limit in limits if limit is not None))


def engine_answers(engine: str, timeout: float = ENGINE_CHECK_TIMEOUT_S) -> bool:
    """Whether ``<engine> info`` succeeds within the deadline (its daemon or socket answers)."""
    binary = find_binary(engine)
    if binary is None:
        return False
    try:
        rc, _out, _err = run([binary, "info"], timeout=timeout)
    except (ProbeAbsent, ProbeError):
        return False
    return rc == 0


# ---------------------------------------------------------------------------------------------
# The run


class RunLog:
    """Append-only JSONL events of a workload run (nowhere without a path)."""

    def __init__(self, path: Optional[str]) -> None:
        self.path = path
        self._start = time.monotonic()
        self._handle: Optional[IO[str]] = None
        if path:
            try:
                self._handle = open_log(path)  # 0600, no symlink followed, no FIFO
            except OSError as exc:
                raise WorkloadError("run_log: cannot open %s for appending: %s" % (path, exc.strerror or exc)) from None

    def event(self, event: str, **fields: Any) -> None:
        if self._handle is None:
            return
        record = {"ts": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                  "elapsed_s": round(time.monotonic() - self._start, 3), "event": event}
        record.update(fields)
        self._handle.write(json.dumps(record, sort_keys=True, default=str) + "\n")

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def helper_source() -> str:
    """The phases helper's source, for a copy on the run's PYTHONPATH (it is in a zip under Ansible)."""
    loader = getattr(phases_helper, "__loader__", None)
    source = None
    if loader is not None and hasattr(loader, "get_source"):
        try:
            source = loader.get_source(phases_helper.__name__)
        except (ImportError, OSError):
            source = None
    if source is None:
        with open(phases_helper.__file__) as handle:  # a plain file when not zipped
            source = handle.read()
    return source


def _row(name: str, args: str, status: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, "args": args, "status": status, "performance": None, "metric": None,
                           "duration_s": None, "exit_code": None, "log_tail": [], "phases": None, "telemetry": None,
                           "runtime": None, "timeout_s": None, "reason": None, "extra": {}}
    row.update(fields)
    return row


class Runner:
    """Runs selected models one after the other; every model gives its rows, whatever happened to the others."""

    def __init__(self, catalogue_root: str, runtime: str = "host", timeout: Optional[int] = -1,
                 gpu_vendor: str = "auto", gpus: Optional[int] = None, extra_env: Optional[Mapping[str, str]] = None,
                 log_lines: int = 50, python: Optional[str] = None, sample_interval_s: float = 1.0,
                 run_log: Optional[RunLog] = None, devices_dir: str = "/sys/bus/pci/devices",
                 engine_ok: Callable[[str], bool] = engine_answers, gpu_telemetry: bool = True) -> None:
        if runtime not in RUNTIMES:
            raise WorkloadError("runtime %r is not one of %s" % (runtime, ", ".join(RUNTIMES)))
        self.root = os.path.abspath(catalogue_root)
        self.runtime = runtime
        self.timeout = timeout
        counted, detected = count_gpus(devices_dir, timeout=10)
        self.gpus = counted if gpus is None else gpus
        self.vendor = {"auto": detected, "amd": "AMD", "nvidia": "NVIDIA", "none": None}.get(gpu_vendor, detected)
        self.extra_env = dict(extra_env or {})
        self.log_lines = log_lines
        self.python = python or sys.executable
        self.sample_interval_s = sample_interval_s
        self.run_log = run_log or RunLog(None)
        self.engine_ok = engine_ok
        self.gpu_telemetry = gpu_telemetry
        self.notes: list[str] = []

    def run_all(self, selected: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Rows of every selected model, and the sampler's description."""
        workspace_root = tempfile.mkdtemp(prefix="hydra-workload-")
        sampler = telemetry.Sampler(self.sample_interval_s, meminfo="/proc/meminfo")
        if self.gpu_telemetry:
            sampler.gpu_source, source_notes = telemetry.pick_gpu_source(sampler.add_gpu_row, self.sample_interval_s)
            sampler.notes.extend(source_notes)
        sampler.start()
        rows: list[dict[str, Any]] = []
        self.run_log.event("run_start", models=[model["name"] for model in selected], runtime=self.runtime, gpus=self.gpus,
                           gpu_vendor=self.vendor)
        try:
            with open(os.path.join(workspace_root, "hydra_phases.py"), "w") as handle:
                handle.write(helper_source())
            for index, model in enumerate(selected):
                workspace = os.path.join(workspace_root, "w%d" % index)
                os.mkdir(workspace)
                self.run_log.event("workload_start", name=model["name"], args=model.get("args", ""))
                start = time.monotonic()
                try:
                    model_rows = self.run_one(model, workspace, workspace_root)
                finally:
                    shutil.rmtree(workspace, ignore_errors=True)
                sampler.sample_now()
                end = time.monotonic()
                summary = sampler.summary(start, end)
                summary["memory"] = sampler.memory_summary(start, end)
                for row in model_rows:
                    row["telemetry"] = summary
                    self.run_log.event("workload_end", name=row["name"], status=row["status"], performance=row["performance"],
                                       metric=row["metric"], duration_s=row["duration_s"], reason=row["reason"])
                rows.extend(model_rows)
        finally:
            sampler.stop()
            shutil.rmtree(workspace_root, ignore_errors=True)
            self.run_log.event("run_end", statuses={status: sum(1 for row in rows if row["status"] == status)
                                                    for status in RUN_STATUSES})
        return {"workloads": rows, "sampler": sampler.describe(), "workspace_removed": not os.path.exists(workspace_root)}

    def _requested_gpus(self, model: dict[str, Any]) -> Optional[int]:
        """The model's n_gpus (-1: all of the host's); None when it is not a whole number."""
        try:
            return int(str(model.get("n_gpus", "-1")).strip())
        except ValueError:
            return None

    def run_one(self, model: dict[str, Any], workspace: str, workspace_root: str) -> list[dict[str, Any]]:
        name = model["name"]
        args = str(model.get("args", ""))
        limit = resolve_timeout(self.timeout, model.get("timeout"))
        wanted = self._requested_gpus(model)
        if wanted is None:
            return [_row(name, args, RUN_FAILURE, reason="n_gpus %r is not a whole number (-1 means all)" % model.get("n_gpus"))]
        if self.gpus is None and wanted != 0:
            return [_row(name, args, RUN_FAILURE, reason="asks for GPUs, and this host's could not be counted (the PCI "
                                                         "bus did not answer in time); give the number of GPUs to run it")]
        have = self.gpus or 0
        if wanted == -1:
            wanted = have
        if wanted > have:
            return [_row(name, args, RUN_SKIPPED, reason="asks for %d GPUs; this host has %d" % (wanted, have))]
        scripts = str(model.get("scripts") or "")
        if not scripts:
            return [_row(name, args, RUN_FAILURE, reason="the model names no scripts")]
        try:
            copy_from, command = script_command(scripts, args, self.python if self.runtime == "host" else "python3")
        except ValueError as exc:
            return [_row(name, args, RUN_FAILURE, reason="args %r cannot be split into arguments: %s" % (args, exc))]
        source_dir = os.path.normpath(os.path.join(self.root, copy_from))
        run_dir = os.path.join(workspace, "run_directory")
        if not os.path.isfile(os.path.join(source_dir, command[1])):
            return [_row(name, args, RUN_FAILURE, reason="script %s not found in the catalogue" % scripts)]
        shutil.copytree(source_dir, run_dir, symlinks=True)
        runtime = pick_runtime(self.runtime, bool(model.get("dockerfile")), self.engine_ok)
        phases_file = os.path.join(workspace, "phases.jsonl")
        log_path = os.path.join(workspace, "run.log")
        env = {
            "MAD_MODEL_NAME": name, "MAD_RUNTIME_NGPUS": str(wanted), "MAD_SYSTEM_NGPUS": str(have),
            "MAD_GPU_VENDOR": self.vendor or "", phases_helper.ENV_VAR: phases_file,
        }
        if model.get("multiple_results"):
            env["MAD_OUTPUT_CSV"] = str(model["multiple_results"])
        env.update(self.extra_env)
        started = time.monotonic()
        try:
            if runtime == "host":
                rc, timed_out = self._run_host(command, run_dir, env, workspace_root, log_path, limit)
            else:
                rc, timed_out = self._run_container(runtime, model, command, workspace, env, log_path, limit)
        except (ProbeAbsent, ProbeError) as exc:
            return [_row(name, args, RUN_FAILURE, runtime=runtime, timeout_s=limit, reason=str(exc))]
        duration = round(time.monotonic() - started, 3)
        data = _read_tail(log_path)
        base = {"duration_s": duration, "exit_code": rc, "log_tail": log_tail(data, self.log_lines),
                "phases": _phase_summary(phases_file), "runtime": runtime, "timeout_s": limit}
        if timed_out:
            return [_row(name, args, RUN_TIMEOUT, reason="killed at the %ss deadline" % limit, **base)]
        if rc != 0:
            return [_row(name, args, RUN_FAILURE, reason="the script exited with status %s" % rc, **base)]
        log_text = _read_all(log_path)
        error = find_error_pattern(log_text)
        if model.get("multiple_results"):
            return self._multiple_rows(model, args, workspace, run_dir, base, error)
        found = parse_performance(log_text)
        if found is None:
            return [_row(name, args, RUN_FAILURE, reason="no 'performance: <number> <metric>' line in the log", **base)]
        problem = performance_problem(found[0])
        if error or problem:
            reason = "error pattern in the log: " + error if error else str(problem)
            return [_row(name, args, RUN_FAILURE, performance=found[0], metric=found[1], reason=reason, **base)]
        return [_row(name, args, RUN_SUCCESS, performance=found[0], metric=found[1], **base)]

    def _multiple_rows(self, model: dict[str, Any], args: str, workspace: str, run_dir: str, base: dict[str, Any],
                       error: Optional[str]) -> list[dict[str, Any]]:
        name = model["name"]
        filename = str(model["multiple_results"]).strip()
        path = next((p for p in (os.path.join(workspace, filename), os.path.join(run_dir, filename)) if os.path.isfile(p)), None)
        if path is None:
            return [_row(name, args, RUN_FAILURE, reason="multiple_results file %s was not written" % filename, **base)]
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                rows, problem = parse_multiple_results(handle.read())
        except OSError as exc:
            rows, problem = None, "cannot be read: %s" % exc.strerror
        if rows is None:
            return [_row(name, args, RUN_FAILURE, reason="multiple_results %s: %s" % (filename, problem), **base)]
        out = []
        for row in rows:
            problem = performance_problem(row.get("performance"))
            status = RUN_SUCCESS if not (error or problem) else RUN_FAILURE
            reason = None if status == RUN_SUCCESS else ("error pattern in the log: " + error if error else problem)
            extra = {key: value for key, value in row.items() if key not in ("model", "performance", "metric")}
            out.append(_row("%s_%s" % (name, row.get("model", "")), args, status, performance=row.get("performance") or None,
                            metric=row.get("metric") or None, reason=reason, extra=extra, **base))
        return out

    def _run_host(self, command: list[str], run_dir: str, env: Mapping[str, str], workspace_root: str, log_path: str,
                  limit: Optional[int]) -> tuple[Optional[int], bool]:
        child = dict(os.environ)
        child.update(env)
        child["PYTHONPATH"] = os.pathsep.join(p for p in (workspace_root, child.get("PYTHONPATH")) if p)
        # A bash script's "python3" is the interpreter running the module (a virtualenv's, say).
        child["PATH"] = os.pathsep.join(p for p in (os.path.dirname(self.python), child.get("PATH")) if p)
        with open(log_path, "a") as handle:
            handle.write("Setting timeout to %s seconds.\n" % (limit if limit is not None else "no"))
        return run_to_file(command, limit, log_path, cwd=run_dir, env=child)

    def _run_container(self, engine: str, model: dict[str, Any], command: list[str], workspace: str, env: Mapping[str, str],
                       log_path: str, limit: Optional[int]) -> tuple[Optional[int], bool]:
        binary = find_binary(engine)
        if binary is None:
            raise ProbeAbsent("%s: not found" % engine)
        prefix = os.path.join(self.root, str(model.get("dockerfile") or ""))
        candidates = {}
        for path in sorted(glob.glob(prefix + ".*")):
            candidates[path] = read_text_or_none(path) or ""
        context = {"gpu_vendor": self.vendor} if self.vendor else {}
        dockerfiles = matching_dockerfiles(candidates, context)
        if not dockerfiles:
            raise ProbeError("no Dockerfile matches %s.* for gpu_vendor %s" % (model.get("dockerfile"), self.vendor))
        context_dir = os.path.join(self.root, str(model.get("dockercontext") or "docker"))
        tag = "hydra-workload-" + re.sub(r"[^a-z0-9_.-]", "-", os.path.basename(dockerfiles[0]).lower())
        started = time.monotonic()
        rc, timed_out = run_to_file(build_argv(binary, dockerfiles[0], tag, context_dir), limit, log_path)
        if timed_out or rc != 0:
            return rc, timed_out
        left = None if limit is None else max(1, int(limit - (time.monotonic() - started)))
        helper_dir = os.path.join(workspace, "pylib")
        os.mkdir(helper_dir)
        with open(os.path.join(helper_dir, "hydra_phases.py"), "w") as handle:
            handle.write(helper_source())
        inside = dict(env)
        inside[phases_helper.ENV_VAR] = "/myworkspace/phases.jsonl"
        inside["PYTHONPATH"] = "/myworkspace/pylib"
        name = "hydra-workload-%d" % os.getpid()
        argv = container_run_argv(binary, tag, workspace, command, inside, self.vendor, name)
        rc, timed_out = run_to_file(argv, left, log_path)
        if timed_out:
            # Killing the client leaves the container running: remove it by name.
            try:
                run([binary, "rm", "-f", name], timeout=CONTAINER_RM_TIMEOUT_S)
            except (ProbeAbsent, ProbeError):
                pass
        return rc, timed_out


def _read_tail(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_READ_BYTES))
            return handle.read()
    except OSError:
        return b""


def _read_all(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _phase_summary(path: str) -> Optional[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            records, bad = phases_helper.parse_lines(handle)
    except OSError:
        return None
    summary = phases_helper.summarise(records)
    if summary is not None and bad:
        summary["unreadable_lines"] = bad
    return summary


# ---------------------------------------------------------------------------------------------
# The module's one call


def not_run(selected: Sequence[dict[str, Any]], reason: str, log: RunLog, sample_interval_s: float) -> dict[str, Any]:
    """run_all()'s outcome when the idle guard holds the node: every model SKIPPED with ``reason``, nothing sampled."""
    rows = [_row(model["name"], str(model.get("args", "")), RUN_SKIPPED, reason=reason) for model in selected]
    log.event("run_start", models=[model["name"] for model in selected], not_run=reason)
    for row in rows:
        log.event("workload_end", name=row["name"], status=row["status"], performance=None, metric=None, duration_s=None,
                  reason=reason)
    log.event("run_end", statuses={status: len(rows) if status == RUN_SKIPPED else 0 for status in RUN_STATUSES})
    sampler = telemetry.Sampler(sample_interval_s)
    sampler.notes.append("nothing sampled: %s" % reason)
    return {"workloads": rows, "sampler": sampler.describe(), "workspace_removed": True}


def write_catalogue_files(files: Mapping[str, Any], directory: str) -> None:
    """Materialise a catalogue given as {relative path: text} (the built-in one, from the action plugin)."""
    for relpath, text in sorted(files.items()):
        parts = str(relpath).replace("\\", "/").split("/")
        if not relpath or os.path.isabs(str(relpath)) or ".." in parts or not isinstance(text, str):
            raise WorkloadError("catalogue_files: %r is not a relative path inside the catalogue with text content" % relpath)
        path = os.path.join(directory, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)


def validate(timeout: int, log_lines: int, gpus: Optional[int], sample_interval_s: float, extra_env: Mapping[str, Any]) -> None:
    if timeout < -1:
        raise WorkloadError("timeout %s is not accepted: -1 (the model's, else 7200 s), 0 (no limit) or seconds" % timeout)
    if log_lines < 0:
        raise WorkloadError("log_lines %s is not accepted: 0 or more lines" % log_lines)
    if gpus is not None and gpus < 0:
        raise WorkloadError("gpus %s is not accepted: 0 or more" % gpus)
    if not sample_interval_s > 0:
        raise WorkloadError("sample_interval %s is not accepted: seconds above 0" % sample_interval_s)
    for key in extra_env:
        if not key or "=" in str(key):
            raise WorkloadError("extra_env: %r is not an environment variable name" % key)


def execute(mode: str, tags: Sequence[Any], catalogue: Optional[str] = None, catalogue_files: Optional[Mapping[str, Any]] = None,
            runtime: str = "host", timeout: int = -1, gpu_vendor: str = "auto", gpus: Optional[int] = None,
            extra_env: Optional[Mapping[str, Any]] = None, log_lines: int = 50, sample_interval_s: float = 1.0,
            run_log: Optional[str] = None, check_mode: bool = False, slurm_node: Optional[str] = None,
            force: bool = False) -> dict[str, Any]:
    """Discover (list the selection) or run it; WorkloadError/CatalogueError name a bad input in one line.

    A run reads the idle guard first (``slurm_node``: the node's SLURM name; ``force``: run on a busy node anyway):
    on a busy node every selected model is SKIPPED with the guard's reason, and the result's ``idle`` says what held it.
    """
    env = {str(key): str(value) for key, value in (extra_env or {}).items()}
    validate(timeout, log_lines, gpus, sample_interval_s, env)
    if catalogue and catalogue_files:
        raise WorkloadError("catalogue and catalogue_files are mutually exclusive; give one")
    if not catalogue and not catalogue_files:
        raise WorkloadError("no catalogue: give catalogue (a MAD-layout directory) or catalogue_files")
    flat = split_tags(tags)
    if mode == "run" and not flat:
        raise WorkloadError("mode run needs tags (a model name, a tag, scope/name, or all)")
    scratch = tempfile.mkdtemp(prefix="hydra-catalogue-") if catalogue_files else None
    try:
        root = catalogue or scratch
        if catalogue_files:
            write_catalogue_files(catalogue_files, scratch)  # type: ignore[arg-type]  # set just above
        if catalogue and not os.path.isdir(catalogue):
            raise WorkloadError("catalogue %s is not a directory" % catalogue)
        models = Catalogue(root)  # type: ignore[arg-type]  # one of the two is set
        selected = models.select(flat) if flat else []
        result: dict[str, Any] = {"mode": mode, "tags": flat, "catalogue": catalogue or "(catalogue_files)",
                                  "available": models.names() if not flat else None}
        if mode == "discover" or check_mode:
            result["workloads"] = [describe(model, timeout) for model in selected]
            return result
        guard = idle.guard(slurm_node, force) if selected else None
        log = RunLog(run_log)
        try:
            runner = Runner(root, runtime=runtime, timeout=timeout, gpu_vendor=gpu_vendor, gpus=gpus, extra_env=env,  # type: ignore[arg-type]
                            log_lines=log_lines, sample_interval_s=sample_interval_s, run_log=log)
            if guard is not None and guard["refused"]:
                outcome = not_run(selected, "not run: %s" % guard["refused"], log, sample_interval_s)
            else:
                outcome = runner.run_all(selected)
        finally:
            log.close()
        rows = outcome["workloads"]
        result.update(
            workloads=rows, sampler=outcome["sampler"], run_log=run_log, gpus=runner.gpus, gpu_vendor=runner.vendor,
            summary={status: sum(1 for row in rows if row["status"] == status) for status in RUN_STATUSES}, idle=guard)
        return result
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
