# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""nvidia-smi: where it is (find_nvidia_smi), the GPU records it reports (read_gpus), and the pure parsers of
``nvidia-smi -q -x`` and ``nvidia-smi nvlink --status``.

``nvidia_smi_path`` has one meaning in every module (doctor, profile, gpu_settings_apply, mig_apply): the path of
the nvidia-smi binary, None to look it up on PATH. find_nvidia_smi() is the one place that resolves it.

The XML layout changes between driver branches (DTD v11 to v13 in
tests/fixtures/nvidia-smi): ``clocks_throttle_reasons`` became
``clocks_event_reasons``, power moved from ``power_readings`` to
``gpu_power_readings`` with average/instant draw, temperatures gained T.Limit
variants, ``remapped_rows`` is "N/A" text on some GPUs and a structure on
others. Everything is normalised here so checks never see those differences:
"N/A"-like fields become None and values with units become numbers.

Every value goes through one reader (read_value): it tells a value apart from
text that means "absent by design" (N/A, Not Supported, deprecated: None in the
record) and from text that says the value could not be read (Unknown Error, GPU
is lost, GPU requires reset, Insufficient Permissions, ERR!, Not Found, any
other NVML error string, text where a number belongs, a number beyond range).
A number is read whole or not at all: "0x10" is not 0, "2^64" not 2, "1.5.3" not 1.5; a reading below zero
(a temperature of -1 C: the driver's "no reading") or from 2**64 up is out of range, as is NaN.
Unreadable values are None in the record too, and each GPU record carries them
in ``unreadable``: {record field path: the text nvidia-smi wrote}, so that a
check can tell "nothing to read" from "could not read it".

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import re
import xml.etree.ElementTree as ET
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import LINE_ERRORS, BadLine, BadLines

# doctor's and profile's ``timeouts.nvidia_smi`` default: nvidia-smi -q -x on an 8-GPU node takes seconds.
DEFAULT_TIMEOUT = 30

# What nvidia-smi writes where a value is absent by design (compared lower case, brackets stripped).
_NO_VALUE = frozenset((
    "", "n/a", "not supported", "not available", "requested functionality has been deprecated",
))
# What it writes where reading a value failed: NVML's error strings (nvmlErrorString, nvml.h) as nvidia-smi prints
# them, in XML plainly and in CSV in brackets ("[Unknown Error]", "[GPU requires reset]"), and the "ERR!" of its table.
_ERROR_TEXT = frozenset((
    "unknown error", "gpu is lost", "gpu requires reset", "insufficient permissions", "err!", "not found",
    "uninitialized", "invalid argument", "driver not loaded", "timeout", "interrupt request issue",
    "nvml shared library not found", "function not found", "corrupted inforom", "insufficient external power",
    "insufficient size", "insufficient memory", "insufficient resources", "no data", "in use by another client",
    "gpu access blocked by the operating system", "rm has detected an nvml/rm version mismatch",
    "system is not ready", "gpu not found", "invalid state", "operation not supported",
    "ran out of critical resources, other than memory",
))
# Substrings that mark an error string whatever its exact spelling or brackets.
_ERROR_WORDS = ("gpu is lost", "requires reset", "unknown error", "insufficient permissions", "err!")
# Raw texts saying the GPU itself is gone or must be reset (checks FAIL on these, not ERROR).
LOST_WORDS = ("gpu is lost", "requires reset", "reset required", "fallen off the bus")
OUT_OF_RANGE = "value out of range"
# Readings are below 2**64 (counters are 64-bit unsigned; nothing nvidia-smi reports is larger).
_LIMIT = 2 ** 64
_NUMBER = re.compile(r"\s*([-+]?\d+(?:\.\d+)?)((?:[eE][-+]?\d+)?)")
# What may follow a number: a unit ("C", "W", "MiB", "%", "x", "MHz", "GT/s"), never more digits or signs.
_UNIT = re.compile(r"[A-Za-z%/\u00b0][A-Za-z%/\u00b0() ]*")
_HEX_TAIL = re.compile(r"[xX][0-9a-fA-F]")
_TRUE = frozenset(("active", "yes", "enabled", "true"))
_FALSE = frozenset(("not active", "no", "disabled", "false"))

# What read_value tells apart.
ABSENT = "absent"
VALUE = "value"
UNREADABLE = "unreadable"


def read_value(raw: Optional[str]) -> tuple[str, Optional[str]]:
    """The one reader of nvidia-smi's value text: (ABSENT, None), (VALUE, stripped text) or (UNREADABLE, raw text).

    Absent by design: missing, empty, "N/A", "Not Supported", "Not Available" (bracketed or not), "Requested
    functionality has been deprecated". Unreadable: an NVML error string ("Unknown Error", "GPU is lost",
    "[GPU requires reset]", "Insufficient Permissions", "ERR!", "[Not Found]", ...) or any other bracketed text.
    """
    if raw is None:
        return ABSENT, None
    value = raw.strip()
    lowered = value.lower()
    bare = lowered[1:-1].strip() if lowered.startswith("[") and lowered.endswith("]") else lowered
    if bare in _NO_VALUE:
        return ABSENT, None
    if bare in _ERROR_TEXT or bare != lowered or any(word in lowered for word in _ERROR_WORDS):
        return UNREADABLE, _shorten(value)
    return VALUE, value


def is_lost(raw: Optional[str]) -> bool:
    """Whether an unreadable value's text says the GPU is lost or needs a reset."""
    lowered = (raw or "").lower()
    return any(word in lowered for word in LOST_WORDS)


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else "%s... (%d characters)" % (text[:limit], len(text))


class Unreadable:
    """A value nvidia-smi could not read, while a record is built; _gpu() moves it into ``unreadable``."""

    __slots__ = ("raw",)

    def __init__(self, raw: str) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return "Unreadable(%r)" % self.raw


def to_number(text: str, signed: bool = False) -> Any:
    """'16x', '27 C', '67.03 W' -> 16, 27, 67.03.

    Unreadable for text that is not one number with an optional unit ('0x10', '2^64', '1.5.3', 'N/A W'), and for
    a number out of range: from 2**64 up, NaN, infinite, or below zero unless ``signed`` (only T.Limit readings
    are: degrees left below the limit).
    """
    match = _NUMBER.match(text)
    if not match:
        return Unreadable(_shorten(text.strip()))
    rest = text[match.end():].strip()
    if rest and (not _UNIT.fullmatch(rest) or _HEX_TAIL.match(rest)):
        return Unreadable(_shorten(text.strip()))
    raw = match.group(1) + match.group(2)
    if len(raw.lstrip("+-").split(".")[0]) > 20:
        return Unreadable("%s (%s)" % (OUT_OF_RANGE, _shorten(raw, 24)))
    number = float(raw) if "." in raw or match.group(2) else int(raw)
    if not ((-_LIMIT < number if signed else 0 <= number) and number < _LIMIT):  # also False for inf and nan
        return Unreadable("%s (%s)" % (OUT_OF_RANGE, _shorten(raw, 24)))
    return number


class NvidiaSmiParseError(ValueError):
    """The text is not nvidia-smi XML we can read."""


def find_nvidia_smi(override: Optional[str] = None) -> str:
    """Absolute path of nvidia-smi: ``override`` (the ``nvidia_smi_path`` option) when given, else from PATH.

    ProbeAbsent when it is not on PATH; ProbeError when an explicit path does not exist or is not an executable file.
    """
    if override:
        if not os.path.exists(override):
            raise ProbeError("nvidia_smi_path %s does not exist" % override)
        if os.path.isdir(override) or not os.access(override, os.X_OK):
            raise ProbeError("nvidia_smi_path %s is not an executable file (permission denied)" % override)
        return override
    path = command.find_binary("nvidia-smi")
    if not path:
        raise ProbeAbsent("nvidia-smi not found on PATH (no NVIDIA driver installed?)")
    return path


def first_line(*texts: Optional[str]) -> str:
    """The first non-blank line of the first text that has one (for one-line error messages)."""
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return "no output"


def read_gpus(binary: str, timeout: float) -> dict[str, Any]:
    """``nvidia-smi -q -x``, run once and parsed: {driver_version, cuda_version, attached_gpus, timestamp, gpus}.

    ``gpus`` is a list of GPU records in the shape _host/gpus/__init__.py documents. ProbeError when nvidia-smi
    fails, times out or writes XML that cannot be parsed.
    """
    rc, out, err = command.run([binary, "-q", "-x"], timeout)
    if rc != 0:
        raise ProbeError("nvidia-smi -q -x exited with rc %s: %s" % (rc, first_line(err, out)))
    try:
        return parse_nvidia_smi(out)
    except NvidiaSmiParseError as exc:
        raise ProbeError("nvidia-smi returned unparsable XML: %s" % exc) from None


def _node(elem: Optional[ET.Element], path: Optional[str]) -> Optional[ET.Element]:
    return elem if elem is None or not path else elem.find(path)


def value_of(raw: Optional[str]) -> Any:
    """One value as nvidia-smi wrote it (an XML element's text, a ``--format=csv`` field): the stripped text, None
    when missing or absent by design ("[N/A]", "[Not Supported]"), Unreadable when it could not be read
    ("[Unknown Error]", "[GPU requires reset]"): read_value's one rule."""
    kind, value = read_value(raw)
    return Unreadable(value or "") if kind == UNREADABLE else value


def csv_fields(line: str, count: Optional[int] = None) -> list[Any]:
    """One line of ``nvidia-smi --query-*=... --format=csv`` output -> its fields, each through value_of. ``count``:
    the fields asked for; the last takes the rest of the line (nvidia-smi does not quote: a process name may hold a
    comma)."""
    return [value_of(field) for field in line.split(",", count - 1 if count else -1)]


def value_at(elem: Optional[ET.Element], path: Optional[str] = None) -> Any:
    """Stripped text of elem/path, None when missing or absent by design, Unreadable when it could not be read."""
    node = _node(elem, path)
    return value_of(None if node is None else node.text)


def text_at(elem: Optional[ET.Element], path: Optional[str] = None) -> Optional[str]:
    """Stripped text of elem/path; None when missing, absent by design or unreadable."""
    value = value_at(elem, path)
    return None if isinstance(value, Unreadable) else value


def number_at(elem: Optional[ET.Element], path: Optional[str] = None, signed: bool = False) -> Any:
    """The number of a value with a unit: '16x', '27 C', '67.03 W', '81920 MiB', '0 %' -> 16, 27, 67.03, 81920, 0.

    None when absent; Unreadable for an error string, text that is not a number, or a number out of range
    (to_number; below zero unless ``signed``).
    """
    value = value_at(elem, path)
    return to_number(value, signed) if isinstance(value, str) else value


def flag_at(elem: Optional[ET.Element], path: Optional[str] = None) -> Any:
    """Active/Yes/Enabled -> True, Not Active/No/Disabled -> False; None when absent, Unreadable otherwise."""
    value = value_at(elem, path)
    if not isinstance(value, str):
        return value
    lowered = value.lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else Unreadable(_shorten(value))


def _first_number(elem: Optional[ET.Element], *paths: str) -> Any:
    """The first value found at paths, the element names differing between DTDs; an Unreadable one among them wins."""
    values = [number_at(elem, path) for path in paths]
    for value in values:
        if isinstance(value, Unreadable):
            return value
    return next((v for v in values if v is not None), None)


def _total(*values: Any) -> Any:
    broken = [v for v in values if isinstance(v, Unreadable)]
    if broken:
        return broken[0]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _difference(total: Any, part: Any) -> Any:
    for value in (total, part):
        if isinstance(value, Unreadable):
            return value
    return None if total is None or part is None else total - part


def take_unreadable(value: Any, path: str, found: dict[str, str]) -> Any:
    """value with every Unreadable replaced by None, each recorded in found under its record field path."""
    if isinstance(value, Unreadable):
        found[path] = value.raw
        return None
    if isinstance(value, dict):
        return dict((key, take_unreadable(item, "%s.%s" % (path, key) if path else key, found))
                    for key, item in value.items())
    return value


def parse_nvidia_smi(text: str) -> dict[str, Any]:
    """``nvidia-smi -q -x`` output -> {driver_version, cuda_version, attached_gpus, timestamp, gpus}."""
    if not text or not text.strip():
        raise NvidiaSmiParseError("empty output")
    try:
        # ElementTree never fetches the DTD the DOCTYPE names.
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise NvidiaSmiParseError(str(exc)) from None
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiParseError("root element is <%s>, not <nvidia_smi_log>" % root.tag)
    unreadable: dict[str, str] = {}
    top = take_unreadable({
        "timestamp": value_at(root, "timestamp"),
        "driver_version": value_at(root, "driver_version"),
        "cuda_version": value_at(root, "cuda_version"),
        "attached_gpus": number_at(root, "attached_gpus"),
    }, "", unreadable)
    top["gpus"] = [_gpu(index, gpu) for index, gpu in enumerate(root.findall("gpu"))]
    top["unreadable"] = unreadable
    return top


def _gpu(index: int, gpu: ET.Element) -> dict[str, Any]:
    pci = gpu.find("pci")
    record = {
        "vendor": "nvidia",
        "index": index,
        "pci_bus_id": text_at(pci, "pci_bus_id") or gpu.get("id"),
        "uuid": value_at(gpu, "uuid"),
        "name": value_at(gpu, "product_name"),
        "brand": value_at(gpu, "product_brand"),
        "architecture": value_at(gpu, "product_architecture"),
        "serial": value_at(gpu, "serial"),
        "board_part_number": value_at(gpu, "board_part_number"),
        "vbios_version": value_at(gpu, "vbios_version"),
        "persistence_mode": value_at(gpu, "persistence_mode"),
        "performance_state": value_at(gpu, "performance_state"),
        # None (bare metal), Pass-Through, VGPU (a vGPU guest: temperatures and clocks are placeholders), Host VGPU.
        "virtualization_mode": value_at(gpu, "gpu_virtualization_mode/virtualization_mode"),
        # The vGPU software license of a vGPU guest or a GRID-driver GPU: Licensed (Expiry: ...), Unlicensed
        # (Unrestricted) while its grace period runs, Unlicensed (Restricted) once performance is restricted.
        "vgpu_license": value_at(gpu, "vgpu_software_licensed_product/license_status"),
        "recovery": {
            # DTD v13 (driver 570+): None, Reset, Reboot, Drain P2P, Drain and Reset.
            "action": value_at(gpu, "gpu_recovery_action"),
            # DTD v12: Yes/No each.
            "reset_required": flag_at(gpu, "gpu_reset_status/reset_required"),
            "drain_and_reset_recommended": flag_at(gpu, "gpu_reset_status/drain_and_reset_recommended"),
        },
        "mig": {
            "current": value_at(gpu, "mig_mode/current_mig"),
            "pending": value_at(gpu, "mig_mode/pending_mig"),
            "instances": len(gpu.findall("mig_devices/mig_device")),
        },
        "pcie": _pcie(pci),
        "clock_event_reasons": _clock_event_reasons(gpu),
        "utilization": {"gpu_pct": number_at(gpu, "utilization/gpu_util"),
                        "memory_pct": number_at(gpu, "utilization/memory_util")},
        "memory": {"total_mib": number_at(gpu, "fb_memory_usage/total"),
                   "used_mib": number_at(gpu, "fb_memory_usage/used")},
        "ecc": _ecc(gpu),
        # DTD v13 (drivers 580 and 595 in the recordings): a memory channel or TPC repair waiting for a GPU reset,
        # and memory errors no repair can fix (nvmlDeviceGetRepairStatus, nvmlDeviceGetUnrepairableMemoryFlag_v1).
        "repair": {"channel_pending": flag_at(gpu, "ecc_errors/channel_repair_pending"),
                   "tpc_pending": flag_at(gpu, "ecc_errors/tpc_repair_pending"),
                   "unrepairable_memory": flag_at(gpu, "ecc_errors/unrepairable_memory")},
        "retired_pages": _retired_pages(gpu.find("retired_pages")),
        "remapped_rows": _remapped_rows(gpu.find("remapped_rows")),
        "temperature": _temperature(gpu.find("temperature")),
        "power": _power(gpu),
        "clocks": _clocks(gpu.find("clocks")),
        "max_clocks": _clocks(gpu.find("max_clocks")),
        "applications_clocks": _clocks(gpu.find("applications_clocks")),
        "default_applications_clocks": _clocks(gpu.find("default_applications_clocks")),
        # Multi-node NVLink (GB200/GB300, driver 550+): the partition (clique) and NVLink domain (cluster UUID) the
        # GPU joined, and the fabric's own health: a summary (driver 580; 570.124.06 writes only the conditions),
        # bandwidth (Full / Degraded), the route and access-timeout conditions (True / False), a configuration fault.
        "fabric": {"state": value_at(gpu, "fabric/state"), "status": _fabric_status(gpu),
                   "clique_id": number_at(gpu, "fabric/cliqueId"), "cluster_uuid": value_at(gpu, "fabric/clusterUuid"),
                   "health_summary": value_at(gpu, "fabric/health/summary"),
                   "bandwidth": value_at(gpu, "fabric/health/bandwidth"),
                   "route_recovery": flag_at(gpu, "fabric/health/route_recovery_in_progress"),
                   "route_unhealthy": flag_at(gpu, "fabric/health/route_unhealthy"),
                   "access_timeout_recovery": flag_at(gpu, "fabric/health/access_timeout_recovery"),
                   "incorrect_configuration": value_at(gpu, "fabric/health/incorrect_configuration")},
    }
    unreadable: dict[str, str] = {}
    result = take_unreadable(record, "", unreadable)
    result["unreadable"] = unreadable
    return result


def _fabric_status(gpu: ET.Element) -> Optional[str]:
    """The fabric probe's result, None when absent: an NVML return code as nvmlErrorString writes it ("Success",
    "Insufficient Resources"), so an error string here is the reading itself, not a value that could not be read."""
    value = value_at(gpu, "fabric/status")
    return value.raw if isinstance(value, Unreadable) else value


def _pcie(pci: Optional[ET.Element]) -> dict[str, Any]:
    link = "pci_gpu_link_info/"
    return {
        "gen_current": number_at(pci, link + "pcie_gen/current_link_gen"),
        # max_link_gen is what GPU and host can both do; the device/host maxima exist from DTD v12.
        "gen_max": number_at(pci, link + "pcie_gen/max_link_gen"),
        "gen_device_max": number_at(pci, link + "pcie_gen/max_device_link_gen"),
        "gen_host_max": number_at(pci, link + "pcie_gen/max_host_link_gen"),
        "width_current": number_at(pci, link + "link_widths/current_link_width"),
        # The GPU's own maximum: a narrower slot still reports the card's x16.
        "width_max": number_at(pci, link + "link_widths/max_link_width"),
        "replay_counter": number_at(pci, "replay_counter"),
        "replay_rollover_counter": number_at(pci, "replay_rollover_counter"),
    }


def _clock_event_reasons(gpu: ET.Element) -> dict[str, Any]:
    """{reason: active?} from either element family (renamed from 'throttle' to 'event' in driver 535)."""
    for container, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                              ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        node = gpu.find(container)
        if node is not None:
            return dict((child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag, flag_at(child))
                        for child in node)
    return {}


def _ecc(gpu: ET.Element) -> dict[str, Any]:
    errors = gpu.find("ecc_errors")
    volatile = _ecc_counts(None if errors is None else errors.find("volatile"))
    if volatile["sram_uncorrectable"] is None:
        # With MIG enabled, driver 510 (DTD v11) writes the GPU's volatile counters N/A and counts SRAM uncorrectable
        # errors per MIG device instead (535 writes both: the GPU's own count is read then).
        per_instance = _total(*(number_at(device, "ecc_error_count/volatile_count/sram_uncorrectable")
                                for device in gpu.findall("mig_devices/mig_device")))
        if per_instance is not None:
            volatile["sram_uncorrectable"] = per_instance
            volatile["uncorrectable"] = _total(volatile["dram_uncorrectable"], per_instance)
    return {
        "current": value_at(gpu, "ecc_mode/current_ecc"),
        "pending": value_at(gpu, "ecc_mode/pending_ecc"),
        "volatile": volatile,
        "aggregate": _ecc_counts(None if errors is None else errors.find("aggregate")),
        "sram_threshold_exceeded": flag_at(errors, "aggregate/sram_threshold_exceeded"),
    }


def _ecc_counts(scope: Optional[ET.Element]) -> dict[str, Any]:
    """Correctable/uncorrectable totals with their DRAM/SRAM split, whichever layout the driver writes."""
    if scope is not None and scope.find("single_bit") is not None:
        # Pre-Ampere layout: single/double bit counts per memory location; device_memory is the DRAM.
        correctable, uncorrectable = number_at(scope, "single_bit/total"), number_at(scope, "double_bit/total")
        dram_correctable = number_at(scope, "single_bit/device_memory")
        dram_uncorrectable = number_at(scope, "double_bit/device_memory")
        return {
            "correctable": correctable, "uncorrectable": uncorrectable,
            "dram_correctable": dram_correctable, "dram_uncorrectable": dram_uncorrectable,
            "sram_correctable": _difference(correctable, dram_correctable),
            "sram_uncorrectable": _difference(uncorrectable, dram_uncorrectable),
        }
    dram_correctable, dram_uncorrectable = number_at(scope, "dram_correctable"), number_at(scope, "dram_uncorrectable")
    sram_correctable = number_at(scope, "sram_correctable")
    sram_uncorrectable = number_at(scope, "sram_uncorrectable")
    if sram_uncorrectable is None:
        # DTD v13 splits SRAM uncorrectable errors by detection method.
        sram_uncorrectable = _total(number_at(scope, "sram_uncorrectable_parity"),
                                    number_at(scope, "sram_uncorrectable_secded"))
    return {
        "correctable": _total(dram_correctable, sram_correctable),
        "uncorrectable": _total(dram_uncorrectable, sram_uncorrectable),
        "dram_correctable": dram_correctable, "dram_uncorrectable": dram_uncorrectable,
        "sram_correctable": sram_correctable, "sram_uncorrectable": sram_uncorrectable,
    }


def _retired_pages(node: Optional[ET.Element]) -> dict[str, Any]:
    pending = flag_at(node, "pending_retirement")
    return {
        "single_bit": number_at(node, "multiple_single_bit_retirement/retired_count"),
        "double_bit": number_at(node, "double_bit_retirement/retired_count"),
        "pending": flag_at(node, "pending_blacklist") if pending is None else pending,
    }


def _remapped_rows(node: Optional[ET.Element]) -> Any:
    """None where the GPU has no row remapper (pre-Ampere) or cannot report it (MIG enabled): the element is 'N/A'.

    Unreadable where the element's text is an error string instead of the structure.
    """
    if node is None:
        return None
    if len(node) == 0:
        value = value_at(node)
        return value if isinstance(value, Unreadable) else None
    histogram = node.find("row_remapper_histogram")
    if histogram is None:
        histogram = node.find("remapped_row_histogram")
    return {
        "correctable": number_at(node, "remapped_row_corr"),
        "uncorrectable": number_at(node, "remapped_row_unc"),
        "pending": flag_at(node, "remapped_row_pending"),
        "failure": flag_at(node, "remapped_row_failure"),
        # Banks by spare rows left: max (all) ... none (no spare row: the next error there cannot be remapped).
        "histogram": dict((child.tag.rsplit("_", 1)[-1], number_at(child)) for child in histogram)
        if histogram is not None else {},
    }


def _temperature(node: Optional[ET.Element]) -> dict[str, Any]:
    return {
        "gpu_c": number_at(node, "gpu_temp"),
        "memory_c": number_at(node, "memory_temp"),
        "shutdown_c": number_at(node, "gpu_temp_max_threshold"),
        "slowdown_c": number_at(node, "gpu_temp_slow_threshold"),
        "max_operating_c": number_at(node, "gpu_temp_max_gpu_threshold"),
        "memory_max_c": number_at(node, "gpu_temp_max_mem_threshold"),
        # Newer drivers on some boards give T.Limit instead: degrees left below the GPU's limit,
        # with the thresholds on the same scale (slowdown at -2 means 2 degrees past the limit).
        "tlimit_c": number_at(node, "gpu_temp_tlimit", signed=True),
        "shutdown_tlimit_c": number_at(node, "gpu_temp_max_tlimit_threshold", signed=True),
        "slowdown_tlimit_c": number_at(node, "gpu_temp_slow_tlimit_threshold", signed=True),
        "max_operating_tlimit_c": number_at(node, "gpu_temp_max_gpu_tlimit_threshold", signed=True),
    }


def _power(gpu: ET.Element) -> dict[str, Any]:
    node = gpu.find("gpu_power_readings")
    if node is None:
        node = gpu.find("power_readings")
    return {
        "draw_w": _first_number(node, "power_draw", "average_power_draw", "instant_power_draw"),
        # The enforced limit: enforced_power_limit (older DTDs) or current_power_limit.
        "limit_w": _first_number(node, "enforced_power_limit", "current_power_limit", "power_limit"),
        "default_limit_w": number_at(node, "default_power_limit"),
        "min_limit_w": number_at(node, "min_power_limit"),
        "max_limit_w": number_at(node, "max_power_limit"),
    }


def _clocks(node: Optional[ET.Element]) -> dict[str, Any]:
    return {
        "graphics_mhz": number_at(node, "graphics_clock"),
        "sm_mhz": number_at(node, "sm_clock"),
        "memory_mhz": number_at(node, "mem_clock"),
    }


_GPU_HEADER = re.compile(r"GPU (\d+): (.*?)(?: \(UUID: ([^)]*)\).*)?$")
_LINK = re.compile(r"Link (\d+): (.*)$")
_SPEED = re.compile(r"([\d.]+) GB/s")


def parse_nvlink_status(text: Optional[str], bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink --status`` -> [{index, name, uuid, links: [{link, active, speed_gbps, state}]}].

    A link line reads "Link 0: 25 GB/s" (active) or "Link 0: <inactive>"; a GPU
    without NVLink has its header line and no link lines. A line that cannot be read (a 5,000-digit index, a
    speed of "1.2.3 GB/s") is counted in ``bad`` and skipped, and so are the link lines of a GPU whose header
    line could not be read: they are never given to the GPU above it.
    """
    bad = BadLines() if bad is None else bad
    gpus: list[dict[str, Any]] = []
    current: Optional[dict[str, Any]] = None
    for number, raw in enumerate((text or "").splitlines(), 1):
        line = raw.strip()
        header = _GPU_HEADER.match(line)
        link = _LINK.match(line)
        try:
            if header:
                current = None
                current = {"index": int(header.group(1)), "name": header.group(2), "uuid": header.group(3), "links": []}
                gpus.append(current)
            elif link and current is not None:
                state = link.group(2).strip()
                speed = _SPEED.search(state)
                current["links"].append({
                    "link": int(link.group(1)),
                    "active": True if speed else False if "inactive" in state.lower() else None,
                    "speed_gbps": float(speed.group(1)) if speed else None,
                    "state": state,
                })
            elif link:
                raise BadLine("a link line of no GPU (its GPU line is missing or could not be read)")
        except LINE_ERRORS as exc:
            bad.add(number, raw, exc)
    return gpus
