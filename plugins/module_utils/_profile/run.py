# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""profile's run: the static profile (static.py), the selected sustained benchmarks under telemetry, the verdict.

The result keeps continuum-hydra's profile JSON shape.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._host import telemetry
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import DEFAULT_COMMAND_TIMEOUT
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._profile import verdict as _host_analysis
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import cpu as cpu_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import disk as disk_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import gpu as gpu_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import memory as memory_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.runlog import RunLog
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import BenchError, outcome
from ansible_collections.continuum.hydra.plugins.module_utils._profile.static import MAX_MOUNTS, block_device_rotational, mount_for, read_mounts, static_profile
from ansible_collections.continuum.hydra.plugins.module_utils._status import (
    BENCH_FAILED,
    BENCH_FALLBACK,
    BENCH_OK,
    BENCH_SKIPPED,
    ERROR,
    PASS,
    READ_ABSENT,
    READ_FAILED,
    SKIP,
    WARN,
)

# The profile result's own schema (continuum-hydra's profile JSON), distinct from doctor's.
PROFILE_SCHEMA_VERSION = "1.0.0"

BENCHMARKS = ("cpu", "memory", "disk", "gpu")  # run order: host first, GPUs (the longest) last
RESULT_KEYS = {"cpu": "cpu_sustained", "memory": "memory_bandwidth", "disk": "disk_random_io", "gpu": "gpu_sustained"}
OPTION_KINDS = {
    "cpu": {"warmup_s": "number", "duration_s": "number", "matrix_n": "int", "timeout_s": "number"},
    "memory": {"warmup_s": "number", "duration_s": "number", "array_mib": "int", "threads": "int", "method": "str"},
    "disk": {"warmup_s": "number", "duration_s": "number", "directory": "str", "file_size_mib": "int", "timeout_s": "number"},
    "gpu": {"warmup_s": "number", "duration_s": "number", "matrix_n": "int", "transfer_mib": "int", "device_copy_mib": "int",
            "repeats": "int", "timeout_s": "number"},
}
# String options with a fixed set of values.
OPTION_CHOICES = {("memory", "method"): memory_bench.METHODS}
# nvidia_smi and command are _host's defaults (doctor's too); torch stays profile's own (its inventory budget is longer
# than doctor's torch probe), and doctor's kernel_log is not a profile option.
DEFAULT_TIMEOUTS = {"nvidia_smi": nvidia_smi.DEFAULT_TIMEOUT, "command": DEFAULT_COMMAND_TIMEOUT, "torch": 120}
# Headline figures of each benchmark for benchmark_results: (key, unit).
HEADLINES = {
    "cpu_sustained": (("single_thread_gflops", "GFLOP/s"), ("all_cores_gflops", "GFLOP/s")),
    "memory_bandwidth": (("copy_gbps", "GB/s"), ("triad_gbps", "GB/s")),
    "disk_random_io": (("read_iops", "IOPS"), ("read_latency_us.p99", "us"), ("seq_read_mbps", "MB/s"), ("seq_write_mbps", "MB/s")),
    "gpu_sustained": (("bf16_tflops", "TFLOP/s"), ("fp16_tflops", "TFLOP/s"), ("fp32_tflops", "TFLOP/s"), ("h2d_gbps", "GB/s"),
                      ("d2h_gbps", "GB/s"), ("memory_bandwidth_gbps", "GB/s")),
}
STATUS_OF = {BENCH_OK: PASS, BENCH_FALLBACK: WARN, BENCH_SKIPPED: SKIP, BENCH_FAILED: ERROR}


class ProfileInputError(ValueError):
    """Bad options: one line naming the bad value and what is accepted."""


# ---------------------------------------------------------------------------------------------
# Options


def _kind_ok(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int) and value > 0
    if kind == "number":
        return isinstance(value, (int, float)) and value > 0
    return isinstance(value, str) and value != ""


def validate(benchmarks: Sequence[str], benchmark_options: Optional[Mapping[str, Any]], warmup_s: Any, duration_s: Any,
             sample_interval_s: Any, expect: Optional[Mapping[str, Any]], timeouts: Optional[Mapping[str, Any]]) -> None:
    """Raise ProfileInputError naming the first bad option."""
    for name in benchmarks:
        if name not in BENCHMARKS:
            raise ProfileInputError("benchmarks: unknown %r; accepted: %s" % (name, ", ".join(BENCHMARKS)))
    for label, value in (("warmup_s", warmup_s), ("duration_s", duration_s), ("sample_interval_s", sample_interval_s)):
        if not _kind_ok(value, "number") and not (label == "warmup_s" and value == 0):
            raise ProfileInputError("%s: %r is not a positive number of seconds" % (label, value))
    for name, opts in (benchmark_options or {}).items():
        if name not in OPTION_KINDS:
            raise ProfileInputError("benchmark_options: unknown benchmark %r; accepted: %s" % (name, ", ".join(BENCHMARKS)))
        if not isinstance(opts, dict):
            raise ProfileInputError("benchmark_options.%s: %r is not a dict" % (name, opts))
        for key, value in opts.items():
            kind = OPTION_KINDS[name].get(key)
            if kind is None:
                raise ProfileInputError("benchmark_options.%s: unknown option %r; accepted: %s"
                                        % (name, key, ", ".join(sorted(OPTION_KINDS[name]))))
            if not _kind_ok(value, kind) and not (key == "warmup_s" and value == 0):
                raise ProfileInputError("benchmark_options.%s.%s: %r is not a positive %s" % (
                    name, key, value, "integer" if kind == "int" else "number" if kind == "number" else "string"))
            choices = OPTION_CHOICES.get((name, key))
            if choices and value not in choices:
                raise ProfileInputError("benchmark_options.%s.%s: %r is not one of %s" % (name, key, value, ", ".join(choices)))
    directory = ((benchmark_options or {}).get("disk") or {}).get("directory")
    if "disk" in benchmarks and directory and not os.path.isdir(directory):
        raise ProfileInputError("benchmark_options.disk.directory: %s is not an existing directory" % directory)
    problems = _expect.problems(expect)
    if problems:
        raise ProfileInputError(problems[0])
    for name, value in (timeouts or {}).items():
        if name not in DEFAULT_TIMEOUTS:
            raise ProfileInputError("timeouts: unknown %r; accepted: %s" % (name, ", ".join(sorted(DEFAULT_TIMEOUTS))))
        if not _kind_ok(value, "number"):
            raise ProfileInputError("timeouts.%s: %r is not a positive number of seconds" % (name, value))


# ---------------------------------------------------------------------------------------------
# The run


FIGURE_NAMES = {"read_latency_us.p99": "read_latency_p99_us"}


def _figure(source: Any, path: str) -> Any:
    value = source
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _flatten(benchmarks: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Headline figures as continuum-hydra's benchmark_results list (name, status, result, unit, message)."""
    results = []
    for key, figures in HEADLINES.items():
        bench = benchmarks[key]
        sources = [("%s.gpu%s." % (key, gpu["index"]), gpu) for gpu in bench.get("gpus") or []] or [(key + ".", bench)]
        for prefix, source in sources:
            status = STATUS_OF.get(source.get("status"), ERROR)
            for path, unit in figures:
                value = _figure(source, path)
                results.append({"name": prefix + FIGURE_NAMES.get(path, path),
                                "status": SKIP if value is None and status == PASS else status,
                                "result": value, "unit": unit, "message": source.get("message") or bench.get("message")})
    return results


def _merged(benchmark_options: Optional[Mapping[str, Any]], name: str, warmup_s: float, duration_s: float) -> dict[str, Any]:
    opts = {"warmup_s": warmup_s, "duration_s": duration_s}
    opts.update((benchmark_options or {}).get(name) or {})
    return opts


def deadline_s(benchmarks: Optional[Sequence[str]] = BENCHMARKS, benchmark_options: Optional[Mapping[str, Any]] = None,
               warmup_s: float = 2.0, duration_s: float = 10.0, expect: Optional[Mapping[str, Any]] = None,
               timeouts: Optional[Mapping[str, float]] = None) -> float:
    """The most a profile run with these options takes: the sum of the timeouts it gives each step.

    The static profile: the torch inventory, nvidia-smi's inventory and topology, a stat and a statvfs of each mount
    (MAX_MOUNTS counted); then each benchmark selected: cpu's two workers, memory's two ways (compiled C, then NumPy),
    disk's run, and gpu's run per GPU (expect.gpu_count, else _expect.GPUS_WHEN_UNKNOWN). ProfileInputError, one
    line, for options the module would refuse."""
    validate(benchmarks or [], benchmark_options, warmup_s, duration_s, 1.0, expect, timeouts)
    limits = dict(DEFAULT_TIMEOUTS, **(timeouts or {}))
    total = limits["torch"] + 2 * limits["nvidia_smi"] + 2 * MAX_MOUNTS * limits["command"]
    for name in [name for name in BENCHMARKS if name in (benchmarks or [])]:
        opts = _merged(benchmark_options, name, warmup_s, duration_s)
        warm, run_s = opts["warmup_s"], opts["duration_s"]
        if name == "cpu":
            total += 2 * (opts.get("timeout_s") or cpu_bench.default_timeout_s(warm, run_s))
        elif name == "memory":
            total += 2 * memory_bench.default_timeout_s(warm, run_s)
        elif name == "disk":
            total += opts.get("timeout_s") or disk_bench.default_timeout_s(opts.get("file_size_mib", disk_bench.DEFAULT_FILE_SIZE_MIB), warm, run_s)
        else:
            total += _expect.gpus_for_deadline(expect) * (opts.get("timeout_s") or gpu_bench.default_timeout_s(warm, run_s))
    return float(total)


def _run_one(name: str, opts: Mapping[str, Any], context: Mapping[str, Any], progress: Any) -> dict[str, Any]:
    if name == "cpu":
        return cpu_bench.run_cpu(opts["warmup_s"], opts["duration_s"], matrix_n=opts.get("matrix_n", 2048),
                                 timeout_s=opts.get("timeout_s"), progress=progress)
    if name == "memory":
        return memory_bench.run_memory(opts["warmup_s"], opts["duration_s"], array_mib=opts.get("array_mib"),
                                       threads=opts.get("threads"), progress=progress, root=context["root"],
                                       method=opts.get("method", memory_bench.AUTO))
    if name == "disk":
        directory = opts.get("directory") or tempfile.gettempdir()
        result = disk_bench.run_disk(directory, file_size_mib=opts.get("file_size_mib", disk_bench.DEFAULT_FILE_SIZE_MIB), warmup_s=opts["warmup_s"],
                                     duration_s=opts["duration_s"], timeout_s=opts.get("timeout_s"), progress=progress)
        mount = mount_for(os.path.realpath(directory), read_mounts(context["root"], result["notes"])) or {}
        result["filesystem_type"] = mount.get("fs_type")
        result["device"] = mount.get("device")
        result["rotational"] = block_device_rotational(context["root"], mount.get("device"))
        if mount.get("fs_type") in _host_analysis.MEMORY_FILE_SYSTEMS:
            result["notes"].append("%s is on %s (memory): the figures are RAM, not disk" % (directory, mount["fs_type"]))
        return result
    return gpu_bench.run_gpu(opts["warmup_s"], opts["duration_s"], python=context["torch_python"],
                             matrix_n=opts.get("matrix_n", 8192), transfer_mib=opts.get("transfer_mib", 256),
                             device_copy_mib=opts.get("device_copy_mib", 1024), repeats=opts.get("repeats", 10),
                             timeout_s=opts.get("timeout_s"), progress=progress, inventory=context["inventory"])


def _measured_under_telemetry(name: str, opts: Mapping[str, Any], context: Mapping[str, Any], sampler: Any, log: RunLog) -> dict[str, Any]:
    """One benchmark, never raising: its outcome with the telemetry of its run (and of each GPU's run)."""
    log.phase_start(name, warmup_s=opts["warmup_s"], duration_s=opts["duration_s"])
    began = time.monotonic()
    try:
        result = _run_one(name, opts, context, log.progress_reporter(name))
    except BenchError as exc:
        result = outcome(BENCH_FAILED, str(exc))
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # A bug in one benchmark must not lose the others' figures.
        result = outcome(BENCH_FAILED, "%s benchmark crashed: %s: %s" % (name, type(exc).__name__, exc))
    ended = time.monotonic()
    result["telemetry"] = sampler.summary(began, ended)
    for gpu in result.get("gpus") or []:
        window = gpu.pop("_window", (began, ended))
        gpu["telemetry"] = next((g for g in sampler.summary(*window)["gpus"] if g["index"] == gpu["index"]), None)
    log.phase_end(name, result["status"], message=result.get("message"))
    return result


def _torch_inventory(torch_python: Optional[str], timeout_s: float) -> dict[str, Any]:
    if not torch_python and importlib.util.find_spec("torch") is None:
        return {"status": READ_ABSENT, "reason": "torch is not installed for %s" % sys.executable}
    try:
        return gpu_bench.torch_inventory(torch_python, timeout_s)
    except BenchError as exc:
        return {"status": READ_FAILED, "reason": str(exc)}


def run(benchmarks: Optional[Sequence[str]] = BENCHMARKS, benchmark_options: Optional[Mapping[str, Any]] = None,
        warmup_s: float = 2.0, duration_s: float = 10.0, sample_interval_s: float = 1.0,
        expect: Optional[Mapping[str, Any]] = None, timeouts: Optional[Mapping[str, float]] = None,
        nvidia_smi_path: Optional[str] = None, torch_python: Optional[str] = None, run_log: Optional[str] = None,
        root: str = "/", probes: Optional[Mapping[str, Callable[[Mapping[str, Any]], Any]]] = None,
        nvml: Any = None) -> dict[str, Any]:
    """The profile result of this host. ``probes``/``nvml``/``root`` replace the real sources in tests."""
    start = time.monotonic()
    validate(benchmarks or [], benchmark_options, warmup_s, duration_s, sample_interval_s, expect, timeouts)
    benchmarks = [name for name in BENCHMARKS if name in (benchmarks or [])]
    try:
        log = RunLog(run_log)
    except ValueError as exc:
        raise ProfileInputError(str(exc)) from None
    expect = expect or {}
    options: dict[str, Any] = {"timeouts": dict(DEFAULT_TIMEOUTS, **(timeouts or {})), "nvidia_smi_path": nvidia_smi_path,
                               "torch_python": torch_python, "expect": expect}
    try:
        log.event("run_start", benchmarks=benchmarks)
        log.phase_start("static_profile")
        inventory = _torch_inventory(torch_python, options["timeouts"]["torch"])
        static = static_profile(options, root=root, probes=probes, inventory=inventory)
        log.phase_end("static_profile", BENCH_OK, gpus=len(static["gpus"]), notes=len(static["notes"]))
        results = dict((key, outcome(BENCH_SKIPPED, "not selected")) for key in RESULT_KEYS.values())
        sampler = None
        if benchmarks:
            sampler = telemetry.Sampler(sample_interval_s, proc_stat=os.path.join(root, "proc/stat"))
            if static["gpus"]:  # a CPU-only host gets CPU telemetry without GPU-source noise
                source, source_notes = telemetry.pick_gpu_source(sampler.add_gpu_row, sample_interval_s, nvidia_smi_path, nvml=nvml)
                sampler.gpu_source = source
                sampler.notes.extend(source_notes)
            sampler.start()
        context = {"root": root, "torch_python": torch_python, "inventory": inventory}
        try:
            for name in benchmarks:
                results[RESULT_KEYS[name]] = _measured_under_telemetry(
                    name, _merged(benchmark_options, name, warmup_s, duration_s), context, sampler, log)
        finally:
            if sampler is not None:
                sampler.stop()
        analysis, remediation = _host_analysis.analyze(static, results, expect)
        log.event("verdict", primary=analysis["primary_bottleneck"], secondary=analysis["secondary_bottleneck"],
                  confidence=analysis["confidence"])
        log.event("run_end")
    finally:
        log.close()
    return {
        "schema_version": PROFILE_SCHEMA_VERSION,
        "static_profile": static,
        "benchmark_results": _flatten(results),
        "benchmarks": results,
        "telemetry": sampler.describe() if sampler is not None else None,
        "analysis": analysis,
        "remediation": remediation,
        "run_log": run_log,
        "phases": log.phases,
        "total_duration_ms": round((time.monotonic() - start) * 1000.0, 3),
    }
