# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Telemetry under load: GPU and CPU samples taken while the benchmarks run, and their summaries.

GPUs are sampled in-process through NVML when ``pynvml`` (nvidia-ml-py) is
importable, else by ONE long-lived ``nvidia-smi --query-gpu=... -lms N``
process whose CSV lines are read as they come: never one nvidia-smi spawn
per sample (10-20 ms each). On a host without nvidia-smi, AMD GPUs are
sampled by ``amd-smi metric --json`` (else ``rocm-smi --showallinfo --json``)
run once per interval in a reader thread, each call under its own deadline:
neither tool has a streaming JSON mode, and one call takes longer than an
NVML read (the interval stretches to the call's length, never overlaps). The CPU is sampled from /proc/stat (~75 us a
read), host memory (when asked) from /proc/meminfo. Only cheap NVML calls are made (no process lists: those hold the
driver lock for milliseconds).

Parsing and aggregation are pure functions, tested on recorded sampler output (its rows read by parse_smi_row).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from typing import Any, Callable, Optional, Union

from ansible_collections.continuum.hydra.plugins.module_utils._host import gpus, procfs
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, signal_group
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import csv_fields, find_nvidia_smi

# NVML clocks event (throttle) reason bits, nvml.h nvmlClocksEventReason*.
THROTTLE_BITS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)

# A GPU counts as busy (under load) in a sample from this utilisation on.
BUSY_UTIL_PCT = 50.0

SMI_QUERY_FIELDS = (
    "timestamp", "index", "pci.bus_id", "utilization.gpu", "memory.used", "power.draw", "temperature.gpu",
    "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks_throttle_reasons.active",
    "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
)


def mean(values: Iterable[float]) -> Optional[float]:
    items = list(values)
    return sum(items) / len(items) if items else None


def rounded(value: Optional[float], digits: int = 3) -> Optional[float]:
    return None if value is None else round(float(value), digits)


def _hex(value: str) -> int:
    return int(value, 16)


# nvidia-smi prints canonical names in the CSV header (clocks.sm -> clocks.current.sm; newer
# drivers call throttle reasons "clocks_event_reasons"): every spelling maps to one row key.
_SMI_COLUMNS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "index": ("index", int),
    "pci.bus_id": ("pci_bus_id", str),
    "utilization.gpu": ("util_pct", float),
    "memory.used": ("memory_used_mib", float),
    "power.draw": ("power_w", float),
    "temperature.gpu": ("temperature_c", float),
    "clocks.current.sm": ("sm_clock_mhz", float),
    "clocks.sm": ("sm_clock_mhz", float),
    "clocks.current.memory": ("mem_clock_mhz", float),
    "clocks.mem": ("mem_clock_mhz", float),
    "clocks.max.sm": ("sm_clock_max_mhz", float),
    "clocks.max.streaming_multiprocessor": ("sm_clock_max_mhz", float),
    "clocks_throttle_reasons.active": ("throttle_mask", _hex),
    "clocks_event_reasons.active": ("throttle_mask", _hex),
    "pcie.link.gen.current": ("pcie_gen", int),
    "pcie.link.gen.gpucurrent": ("pcie_gen", int),
    "pcie.link.gen.max": ("pcie_gen_max", int),
    "pcie.link.width.current": ("pcie_width", int),
    "pcie.link.width.max": ("pcie_width_max", int),
}


def decode_throttle(mask: Optional[int]) -> list[str]:
    """Names of the active clocks event reasons in an NVML bitmask (None -> [])."""
    if mask is None:
        return []
    return [name for bit, name in THROTTLE_BITS if mask & bit]


def parse_smi_header(line: str) -> list[str]:
    """Column names of an nvidia-smi CSV header, units ("[MiB]") stripped."""
    return [field.strip().split(" [", 1)[0].strip() for field in line.split(",")]


def _smi_value(value: Any, convert: Callable[[str], Any]) -> Any:
    """A field (nvidia_smi.csv_fields) converted; None when absent, unreadable or not a number: a sample missing one
    reading is still a sample."""
    if not isinstance(value, str):
        return None  # "[N/A]", "[Not Supported]", "[Unknown Error]"
    try:
        return convert(value if convert is str else value.split()[0])
    except ValueError:
        return None


def parse_smi_row(columns: list[str], line: str) -> Optional[dict[str, Any]]:
    """One CSV line -> a normalised sample row (None for a repeated header or a short line)."""
    values = csv_fields(line)
    if len(values) < len(columns) or values[0] == columns[0] or not any(name in _SMI_COLUMNS for name in columns):
        return None
    row: dict[str, Any] = {}
    for name, value in zip(columns, values):
        if name in _SMI_COLUMNS:
            key, convert = _SMI_COLUMNS[name]
            row[key] = _smi_value(value, convert)
    return normalise_row(row)


def normalise_row(row: dict[str, Any]) -> dict[str, Any]:
    """Fill the keys every sample row has; a recording without an index column is GPU 0."""
    out: dict[str, Any] = {
        "index": 0, "pci_bus_id": None, "util_pct": None, "memory_used_mib": None, "power_w": None,
        "temperature_c": None, "sm_clock_mhz": None, "mem_clock_mhz": None, "sm_clock_max_mhz": None,
        "throttle_mask": None, "pcie_gen": None, "pcie_gen_max": None, "pcie_width": None, "pcie_width_max": None}
    out.update(row)
    if out["index"] is None:
        out["index"] = 0
    return out


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(busy, total) jiffies of the aggregate "cpu" line of /proc/stat."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [int(v) for v in line.split()[1:]]
            # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
            fields = fields[:8]
            idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
            total = sum(fields)
            return total - idle, total
    raise ValueError("no aggregate cpu line in /proc/stat")


def cpu_util_pct(previous: tuple[int, int], current: tuple[int, int]) -> Optional[float]:
    busy = current[0] - previous[0]
    total = current[1] - previous[1]
    return 100.0 * busy / total if total > 0 else None


# ---------------------------------------------------------------------------------------------
# Aggregation


def summarize(cpu_samples: Iterable[tuple[float, Optional[float]]], gpu_samples: Iterable[tuple[float, dict[str, Any]]],
              start: float, end: float) -> dict[str, Any]:
    """Resource summary of the samples taken in [start, end]: what a benchmark did to the machine."""
    cpu = [util for stamp, util in cpu_samples if start <= stamp <= end and util is not None]
    by_gpu: dict[int, list[dict[str, Any]]] = {}
    for stamp, row in gpu_samples:
        if start <= stamp <= end:
            by_gpu.setdefault(row["index"], []).append(row)
    return {
        "cpu": {"samples": len(cpu), "util_mean_pct": rounded(mean(cpu), 1), "util_max_pct": rounded(max(cpu) if cpu else None, 1)},
        "gpus": [summarize_gpu(index, rows) for index, rows in sorted(by_gpu.items())],
    }


def _values(rows: Iterable[dict[str, Any]], key: str) -> list[Any]:
    return [row[key] for row in rows if row.get(key) is not None]


def _min(values: list[Any]) -> Any:
    return min(values) if values else None


def _max(values: list[Any]) -> Any:
    return max(values) if values else None


def summarize_gpu(index: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One GPU's samples -> utilisation, memory, power, clocks, throttle reasons and PCIe link under load."""
    busy = [row for row in rows if (row.get("util_pct") or 0) >= BUSY_UTIL_PCT]
    judged = busy or rows  # "under load" when the GPU was busy at all, else everything seen
    reasons: set[str] = set()
    for row in judged:
        reasons.update(decode_throttle(row.get("throttle_mask")))
        if row.get("throttled"):
            reasons.add("throttled")  # AMD: amd-smi's throttle_status says whether, not why
    reasons.discard("gpu_idle")
    utils = _values(rows, "util_pct")
    return {
        "index": index,
        "pci_bus_id": next((row["pci_bus_id"] for row in rows if row.get("pci_bus_id")), None),
        "samples": len(rows),
        "busy_samples": len(busy),
        "util_mean_pct": rounded(mean(utils), 1),
        "util_max_pct": rounded(_max(utils), 1),
        "memory_used_peak_mib": rounded(_max(_values(rows, "memory_used_mib")), 1),
        "power_mean_w": rounded(mean(_values(rows, "power_w")), 2),
        "power_max_w": rounded(_max(_values(rows, "power_w")), 2),
        "temperature_max_c": rounded(_max(_values(rows, "temperature_c")), 1),
        "sm_clock_min_mhz": rounded(_min(_values(rows, "sm_clock_mhz")), 1),
        "sm_clock_mean_mhz": rounded(mean(_values(rows, "sm_clock_mhz")), 1),
        "sm_clock_busy_mean_mhz": rounded(mean(_values(busy, "sm_clock_mhz")), 1),
        "sm_clock_max_mhz": rounded(_max(_values(rows, "sm_clock_max_mhz")), 1),
        "throttle_reasons": sorted(reasons),
        "pcie_gen_busy_min": _min(_values(busy, "pcie_gen")),
        "pcie_width_busy_min": _min(_values(busy, "pcie_width")),
        "pcie_gen_max": _max(_values(rows, "pcie_gen_max")),
        "pcie_width_max": _max(_values(rows, "pcie_width_max")),
    }


# ---------------------------------------------------------------------------------------------
# GPU sources


class NvmlSource:
    """In-process NVML sampling: polled by the sampler thread, about ten cheap calls per GPU."""

    name = "nvml"
    polled = True

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._handles: list[Any] = []
        self._static: list[dict[str, Any]] = []

    def open(self) -> None:
        nvml = self._nvml
        nvml.nvmlInit()
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            self._handles.append(handle)
            self._static.append({
                "index": index,
                "pci_bus_id": self._call(lambda h=handle: _text(nvml.nvmlDeviceGetPciInfo(h).busId)),
                "sm_clock_max_mhz": self._call(lambda h=handle: nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)),
                "pcie_gen_max": self._call(lambda h=handle: nvml.nvmlDeviceGetMaxPcieLinkGeneration(h)),
                "pcie_width_max": self._call(lambda h=handle: nvml.nvmlDeviceGetMaxPcieLinkWidth(h)),
            })

    def _call(self, func: Callable[..., Any]) -> Any:
        try:
            return func()
        except Exception:  # pylint: disable=broad-exception-caught
            # NVMLError_NotSupported and friends: that field is simply absent on this GPU.
            return None

    def _throttle(self, handle: Any) -> Optional[int]:
        nvml = self._nvml
        getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return self._call(lambda: getter(handle))

    def read(self) -> list[dict[str, Any]]:
        nvml = self._nvml
        rows = []
        for handle, static in zip(self._handles, self._static):
            util = self._call(lambda handle=handle: nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            used = self._call(lambda handle=handle: nvml.nvmlDeviceGetMemoryInfo(handle).used)
            power = self._call(lambda handle=handle: nvml.nvmlDeviceGetPowerUsage(handle))
            row = dict(static)
            row.update({
                "util_pct": util,
                "memory_used_mib": used / 1048576.0 if used is not None else None,
                "power_w": power / 1000.0 if power is not None else None,  # NVML reports milliwatts
                "temperature_c": self._call(lambda handle=handle: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
                "sm_clock_mhz": self._call(lambda handle=handle: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                "mem_clock_mhz": self._call(lambda handle=handle: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                "throttle_mask": self._throttle(handle),
                "pcie_gen": self._call(lambda handle=handle: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
                "pcie_width": self._call(lambda handle=handle: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
            })
            rows.append(normalise_row(row))
        return rows

    def close(self) -> None:
        self._call(self._nvml.nvmlShutdown)


def _text(value: Any) -> Any:
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


class SmiSource:
    """One long-lived ``nvidia-smi --query-gpu ... -lms N`` process; its lines are read as they arrive."""

    name = "nvidia-smi"
    polled = False

    def __init__(self, binary: str, interval_s: float, on_row: Callable[[float, dict[str, Any]], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._binary = binary
        self._interval_ms = max(int(interval_s * 1000), 1)
        self._on_row = on_row
        self._clock = clock
        self._proc: Optional[subprocess.Popen[str]] = None
        self._reader: Optional[threading.Thread] = None
        self.error: Optional[str] = None
        self.rows = 0

    def argv(self) -> list[str]:
        argv = [self._binary, "--query-gpu=" + ",".join(SMI_QUERY_FIELDS), "--format=csv", "-lms", str(self._interval_ms)]
        stdbuf = shutil.which("stdbuf")
        # nvidia-smi block-buffers a pipe; line buffering makes each sample arrive when it is taken.
        return [stdbuf, "-oL"] + argv if stdbuf else argv

    def open(self) -> None:
        env = dict(os.environ, LANG="C", LC_ALL="C")
        self._proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=env, start_new_session=True, universal_newlines=True)
        self._reader = threading.Thread(target=self._read, name="hydra-nvidia-smi-reader")
        self._reader.daemon = True
        self._reader.start()

    def _read(self) -> None:
        columns = None
        for line in self._proc.stdout:  # type: ignore[union-attr]  # open() started it with a pipe
            if not line.strip():
                continue
            if columns is None:
                columns = parse_smi_header(line)
                if not any(name in _SMI_COLUMNS for name in columns):
                    self.error = "nvidia-smi sampler printed no CSV header: %r" % line.strip()[:120]
                    return
                continue
            row = parse_smi_row(columns, line)
            if row is not None:
                self.rows += 1
                self._on_row(self._clock(), row)

    def read(self) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            for sig, wait_s in ((signal.SIGTERM, 2), (signal.SIGKILL, 5)):
                if not signal_group(proc.pid, sig):
                    break
                try:
                    proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._reader.join(timeout=5)  # type: ignore[union-attr]  # open() started it with the process
        stderr = proc.stderr.read() if proc.stderr else ""
        proc.stdout.close()  # type: ignore[union-attr]  # both pipes were asked for
        proc.stderr.close()  # type: ignore[union-attr]
        if self.rows == 0 and self.error is None:
            first = (stderr.strip().splitlines() or ["exit status %s" % proc.returncode])[0]
            self.error = "nvidia-smi sampler produced no samples: %s" % first


def amd_rows(inventory: dict[str, Any]) -> list[dict[str, Any]]:
    """An AMD GPU inventory (_host.gpus.amd_smi / rocm_smi) -> sample rows; AMD's sm clock is the gfx clock."""
    rows = []
    for gpu in inventory.get("gpus") or []:
        def part(section: str, key: str, gpu: dict[str, Any] = gpu) -> Any:
            return (gpu.get(section) or {}).get(key)
        rows.append(normalise_row({
            "index": gpu.get("index"), "pci_bus_id": gpu.get("pci_bus_id"), "util_pct": part("utilization", "gpu_pct"),
            "memory_used_mib": part("memory", "used_mib"), "power_w": part("power", "draw_w"),
            "temperature_c": part("temperature", "gpu_c"), "sm_clock_mhz": part("clocks", "sm_mhz"),
            "mem_clock_mhz": part("clocks", "memory_mhz"), "sm_clock_max_mhz": part("max_clocks", "sm_mhz"),
            "pcie_gen": part("pcie", "gen_current"), "pcie_gen_max": part("pcie", "gen_max"),
            "pcie_width": part("pcie", "width_current"), "pcie_width_max": part("pcie", "width_max"),
            "throttled": part("clock_event_reasons", "throttled")}))
    return rows


class AmdSource:
    """``amd-smi metric --json`` (or ``rocm-smi --showallinfo --json``) once per interval in a reader thread.

    Each call has its own deadline (``call_timeout_s``); three failures in a row stop the sampling with the
    error kept in ``error`` (the Sampler notes it). ``list --json`` is read once at open for the PCI addresses.
    """

    polled = False
    MAX_FAILURES = 3

    def __init__(self, binary: str, tool: str, interval_s: float, on_row: Callable[[float, dict[str, Any]], None],
                 clock: Callable[[], float] = time.monotonic, call_timeout_s: Optional[float] = None) -> None:
        self.name = tool
        self._binary = binary
        self._interval_s = interval_s
        self._on_row = on_row
        self._clock = clock
        self.call_timeout_s = call_timeout_s or min(30.0, max(10.0, 3 * interval_s))
        self._stop = threading.Event()
        self._reader: Optional[threading.Thread] = None
        self._bus_ids: dict[Any, Any] = {}
        self._last_failure: Optional[str] = None
        self.error: Optional[str] = None
        self.rows = 0

    def fetch(self) -> dict[str, Any]:
        """One inventory from the tool; ProbeError when it fails, hangs past the deadline or writes garbage."""
        from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi, rocm_smi

        if self.name == "rocm-smi":
            return rocm_smi.read_gpus(self._binary, self.call_timeout_s)
        metric = amd_smi.run_json(self._binary, ["metric", "--json"], self.call_timeout_s)
        try:
            return amd_smi.parse_amd_smi("[]", metric)
        except amd_smi.AmdSmiParseError as exc:
            raise ProbeError("amd-smi metric returned unreadable JSON: %s" % exc) from None

    def _read_bus_ids(self) -> None:
        from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi

        if self.name != "amd-smi":
            return
        try:
            listing = amd_smi.gpu_list(amd_smi.load_json(amd_smi.run_json(self._binary, ["list", "--json"], self.call_timeout_s),
                                                         "amd-smi list"), "amd-smi list")
        except (ProbeError, ProbeAbsent, amd_smi.AmdSmiParseError):
            return  # rows without a PCI address: the index still names the GPU
        self._bus_ids = dict((item.get("gpu", position), item.get("bdf")) for position, item in enumerate(listing))

    def open(self) -> None:
        self._reader = threading.Thread(target=self._loop, name="hydra-%s-reader" % self.name)
        self._reader.daemon = True
        self._reader.start()

    def _loop(self) -> None:
        self._read_bus_ids()
        failures = 0
        while not self._stop.is_set():
            started = self._clock()
            try:
                rows = amd_rows(self.fetch())
            except (ProbeError, ProbeAbsent) as exc:
                failures += 1
                self._last_failure = str(exc)
                if failures >= self.MAX_FAILURES:
                    self.error = "%s sampler stopped after %d failed calls: %s" % (self.name, failures, exc)
                    return
                rows = []
            else:
                failures = 0
            stamp = self._clock()
            for row in rows:
                if row["pci_bus_id"] is None:
                    row["pci_bus_id"] = self._bus_ids.get(row["index"])
                self.rows += 1
                self._on_row(stamp, row)
            self._stop.wait(max(0.0, self._interval_s - (self._clock() - started)))

    def read(self) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join(timeout=self.call_timeout_s + 5)
        if self.rows == 0 and self.error is None:
            self.error = "%s sampler produced no samples%s" % (self.name, ": " + self._last_failure if self._last_failure else "")


def pick_amd_source(on_row: Callable[[float, dict[str, Any]], None], interval_s: float) -> Optional[AmdSource]:
    """amd-smi, else rocm-smi, when found (gpus.find_rocm_tool; a host without nvidia-smi); None when neither is."""
    for tool in ("amd-smi", "rocm-smi"):
        binary = gpus.find_rocm_tool(tool)
        if binary:
            return AmdSource(binary, tool, interval_s, on_row)
    return None


def pick_gpu_source(on_row: Callable[[float, dict[str, Any]], None], interval_s: float, nvidia_smi_path: Optional[str] = None,
                    nvml: Any = None) -> tuple[Optional[Union[NvmlSource, SmiSource, AmdSource]], list[str]]:
    """NVML when pynvml imports and initialises, else nvidia-smi when found, else (no nvidia_smi_path given)
    amd-smi or rocm-smi when on PATH, else None (CPU only).

    ``nvml`` replaces the pynvml module (tests); False skips NVML.
    """
    notes: list[str] = []
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[no-redef]  # pylint: disable=import-outside-toplevel
        except ImportError:
            nvml = None
            notes.append("pynvml (nvidia-ml-py) is not installed: GPU telemetry falls back to nvidia-smi")
    if nvml:
        source: Union[NvmlSource, SmiSource, AmdSource] = NvmlSource(nvml)
        try:
            source.open()
            return source, notes
        except Exception as exc:  # pylint: disable=broad-exception-caught
            notes.append("NVML is unusable (%s): GPU telemetry falls back to nvidia-smi" % exc)
    try:
        binary = find_nvidia_smi(nvidia_smi_path)
    except (ProbeAbsent, ProbeError):
        binary = None
    if binary:
        source = SmiSource(binary, interval_s, on_row)
        try:
            source.open()
            return source, notes
        except OSError as exc:
            notes.append("cannot start %s: %s" % (binary, exc))
    else:
        amd = pick_amd_source(on_row, interval_s) if nvidia_smi_path is None else None
        if amd is not None:
            notes.append("no nvidia-smi: GPU telemetry from %s" % amd.name)
            amd.open()
            return amd, notes
        notes.append("no nvidia-smi: no GPU telemetry")
    return None, notes


class Sampler:
    """Samples the CPU (and the GPUs through a source) every interval in a background thread."""

    def __init__(self, interval_s: float = 1.0, gpu_source: Optional[Union[NvmlSource, SmiSource, AmdSource]] = None,
                 proc_stat: str = "/proc/stat", meminfo: Optional[str] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.gpu_source = gpu_source
        self.proc_stat = proc_stat
        self.meminfo = meminfo  # host memory is sampled too when given (the workload module: /proc/meminfo)
        self.clock = clock
        self.cpu_samples: list[tuple[float, Optional[float]]] = []
        self.memory_samples: list[tuple[float, float, float]] = []  # (time, used GiB, total GiB)
        self.gpu_samples: list[tuple[float, dict[str, Any]]] = []
        self.notes: list[str] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()  # the loop and sample_now() share the previous /proc/stat reading
        self._previous: Optional[tuple[int, int]] = None

    def add_gpu_row(self, stamp: float, row: dict[str, Any]) -> None:
        self.gpu_samples.append((stamp, row))  # list.append is atomic: the smi reader thread calls this

    def _read_stat(self) -> Optional[tuple[int, int]]:
        try:
            with open(self.proc_stat) as handle:
                return parse_proc_stat(handle.read())
        except (OSError, ValueError) as exc:
            self.notes.append("CPU telemetry stopped: %s" % exc)
            return None

    def start(self) -> None:
        self._previous = self._read_stat()  # before the thread: a sample_now() right after start() has its baseline
        self._thread = threading.Thread(target=self._loop, name="hydra-telemetry")
        self._thread.daemon = True
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            stamp = self.sample_now()
            if self.gpu_source is not None and self.gpu_source.polled:
                for row in self.gpu_source.read():
                    self.gpu_samples.append((stamp, row))

    def sample_now(self) -> float:
        """One CPU sample now (the utilisation since the last reading; its time returned), so that a workload shorter
        than the interval still has one: the caller takes it at the workload's end."""
        with self._lock:
            stamp = self.clock()
            if self._previous is not None:
                current = self._read_stat()
                if current is not None:
                    self.cpu_samples.append((stamp, cpu_util_pct(self._previous, current)))
                self._previous = current
            if self.meminfo:
                self._sample_memory(self.meminfo, stamp)
        return stamp

    def _sample_memory(self, meminfo: str, stamp: float) -> None:
        """Used host memory (MemTotal - MemAvailable) now; nothing when /proc/meminfo cannot be read."""
        values = procfs.parse_meminfo(read_text_or_none(meminfo))
        if "MemTotal" in values and "MemAvailable" in values:
            self.memory_samples.append((stamp, (values["MemTotal"] - values["MemAvailable"]) / 1048576.0,
                                        values["MemTotal"] / 1048576.0))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
        if self.gpu_source is not None:
            self.gpu_source.close()
            error = getattr(self.gpu_source, "error", None)
            if error:
                self.notes.append(error)

    def summary(self, start: float, end: float) -> dict[str, Any]:
        return summarize(self.cpu_samples, self.gpu_samples, start, end)

    def memory_summary(self, start: float, end: float) -> dict[str, Any]:
        """Host memory used in [start, end]: samples, peak and mean used GiB, total GiB."""
        window = [(used, total) for stamp, used, total in self.memory_samples if start <= stamp <= end]
        used = [value for value, _total in window]
        return {"samples": len(window), "used_max_gib": round(max(used), 2) if used else None,
                "used_mean_gib": round(sum(used) / len(used), 2) if used else None,
                "total_gib": round(window[-1][1], 2) if window else None}

    def describe(self) -> dict[str, Any]:
        return {
            "gpu_source": self.gpu_source.name if self.gpu_source is not None else None,
            "interval_s": self.interval_s,
            "cpu_samples": len(self.cpu_samples),
            "gpu_samples": len(self.gpu_samples),
            "notes": list(self.notes),
        }
