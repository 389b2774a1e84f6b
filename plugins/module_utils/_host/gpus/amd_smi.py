# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""amd-smi: the AMD GPU records it reports (read_gpus) and the pure parser of its JSON (parse_amd_smi).

Three calls per doctor run, one per subcommand, together under one ``timeouts.nvidia_smi`` deadline: ``amd-smi list
--json`` (PCI address, UUID, partition of each logical GPU), ``amd-smi static --json`` (model, VBIOS, driver, bus
maxima, power and temperature limits, RAS/ECC state per block, partition modes) and ``amd-smi metric --json``
(temperatures, power, clocks, PCIe link and replays, ECC counts per block, XGMI errors). No single subcommand gives
static and metric values together.

The JSON comes in two shapes: a bare list ``[{"gpu": 0, ...}]`` (ROCm 6.0 to 6.3) and
``{"gpu_data": [...]}`` (newer releases); a lone object is one GPU. amd-smi may print warnings before the JSON:
everything before the first line opening with ``[`` or ``{`` is skipped. Numbers come as ``{"value": N, "unit":
"C"}`` or bare; "N/A" (anywhere, also as a ``value``) is absent by design: None. Text where a number belongs, an
AMDSMI_STATUS_* error, or a number beyond 2**64 is unreadable: None and listed in the record's ``unreadable``; so is
"N/A" where static says the value exists (temperature limits, ECC enabled) on a GPU's first partition, since amd-smi
writes "N/A" for every library call that fails. Keys renamed between releases are read under each
spelling (_DRAW, _reading).

GPUs are matched across the three documents by PCI address (static ``bus.bdf``, list ``bdf``) or UUID, never by
list position; metric names a GPU by its ``gpu`` index only, so it is matched by index only while static and list
agree on which index is which address and metric lists the same indexes (else its readings are unreadable and its
error counts named in ``problems``). An uncorrectable or deferred count above zero is kept even where the RAS block
state reads "N/A" (``ecc.current`` "Unknown").

The records have the shape _host/gpus/__init__.py documents (vendor "amd"); fields amd-smi has no notion of
(persistence mode, MIG, application clocks, fabric, recovery action) are None.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
import re
import time
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command, gpus
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import Unreadable, first_line, take_unreadable, to_number
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pcie_gen

VENDOR = "amd"
# Words amd-smi (and rocm-smi) write where a value is absent by design (compared lower case).
_NO_VALUE = frozenset(("", "n/a", "na", "not supported", "not_supported", "unsupported", "none"))
# Text that says reading failed: the library's status names and the CLI's error words.
_ERROR_WORDS = ("amdsmi_status", "rsmi_status", "error", "permission", "fail", "timeout", "busy", "unknown")
# Compute partition -> logical devices per physical GPU (MI300X: 8 XCDs; CPX is one device per XCD).
# RAS blocks whose uncorrectable errors are memory (HBM/VRAM): the "DRAM" split of the ECC counts.
_MEMORY_BLOCK = "UMC"


class AmdSmiParseError(ValueError):
    """The text is not amd-smi JSON we can read."""


def find_amd_smi() -> str:
    """Absolute path of amd-smi (gpus.find_rocm_tool); ProbeAbsent when it is not there."""
    path = gpus.find_rocm_tool("amd-smi")
    if not path:
        raise ProbeAbsent("amd-smi not found %s" % gpus.ROCM_TOOL_PLACES)
    return path


# ---------------------------------------------------------------- values


def absent(raw: Any) -> bool:
    """Whether a raw JSON value means 'no value by design' (missing, null, "N/A", "Not supported")."""
    return raw is None or (isinstance(raw, str) and raw.strip().lower() in _NO_VALUE)


def shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else "%s... (%d characters)" % (text[:limit], len(text))


def number(raw: Any) -> Any:
    """A number out of ``{"value": N, "unit": U}``, a bare number or numeric text ("53.0", "16 GT/s").

    None when absent by design; Unreadable for text that is not a number, an error word, a bool, a list or
    object, or a number beyond range.
    """
    if isinstance(raw, dict) and "value" in raw:
        raw = raw["value"]
    if absent(raw):
        return None
    if isinstance(raw, bool) or isinstance(raw, (list, dict)):
        return Unreadable(shorten(json.dumps(raw)))
    if isinstance(raw, (int, float)):
        return to_number(repr(raw)) if isinstance(raw, float) else to_number(str(raw))
    text = str(raw).strip()
    lowered = text.lower()
    if any(word in lowered for word in _ERROR_WORDS):
        return Unreadable(shorten(text))
    value = to_number(text)
    return value


def text(raw: Any) -> Any:
    """Stripped text; None when absent by design; Unreadable for an error word or a non-scalar."""
    if isinstance(raw, dict) and "value" in raw:
        raw = raw["value"]
    if absent(raw):
        return None
    if isinstance(raw, (list, dict)):
        return Unreadable(shorten(json.dumps(raw)))
    value = str(raw).strip()
    if any(word in value.lower() for word in ("amdsmi_status", "rsmi_status")):
        return Unreadable(shorten(value))
    return value


def gen_of(speed: Any) -> Any:
    """PCIe generation from a transfer rate in GT/s (16 -> 4); None when unknown; Unreadable passes through."""
    if speed is None or isinstance(speed, Unreadable):
        return speed
    return pcie_gen(speed)


def at(tree: Any, *path: str) -> Any:
    """tree[path[0]][path[1]]...; None where a level is missing or not an object (amd-smi writes "N/A" for a section)."""
    for key in path:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def load_json(output: str, what: str) -> Any:
    """The JSON document in a tool's output, skipping lines printed before it (warnings) and text after it."""
    if not output or not output.strip():
        raise AmdSmiParseError("%s: empty output" % what)
    start = None
    offset = 0
    for line in output.splitlines(True):
        if line.lstrip().startswith(("[", "{")):
            start = offset + len(line) - len(line.lstrip())
            break
        offset += len(line)
    if start is None:
        raise AmdSmiParseError("%s: no JSON in the output (%r)" % (what, shorten(first_line(output))))
    try:
        document, _end = json.JSONDecoder().raw_decode(output, start)
    except ValueError as exc:
        raise AmdSmiParseError("%s: %s" % (what, exc)) from None
    return document


def gpu_list(document: Any, what: str) -> list[dict[str, Any]]:
    """The per-GPU objects of either shape: a list, {"gpu_data": [...]}, or one GPU object."""
    if isinstance(document, dict) and "gpu_data" in document:
        document = document["gpu_data"]
    elif isinstance(document, dict) and "gpu" in document:
        document = [document]
    if not isinstance(document, list) or not all(isinstance(item, dict) for item in document):
        raise AmdSmiParseError("%s: expected a list of GPU objects or {\"gpu_data\": [...]}, got %s" % (
            what, type(document).__name__ if not isinstance(document, dict) else "an object with keys %s" % ", ".join(
                sorted(document)[:5])))
    return document


def empty_record(index: int) -> dict[str, Any]:
    """A record with every field the NVIDIA reader fills, None where AMD tools have no such value."""
    return {
        "vendor": VENDOR, "index": index, "pci_bus_id": None, "uuid": None, "name": None, "brand": None,
        "architecture": None, "serial": None, "board_part_number": None, "vbios_version": None,
        "persistence_mode": None, "performance_state": None, "virtualization_mode": None,
        "recovery": {"action": None, "reset_required": None, "drain_and_reset_recommended": None},
        "mig": {"current": None, "pending": None, "instances": 0},
        "pcie": {"gen_current": None, "gen_max": None, "gen_device_max": None, "gen_host_max": None,
                 "width_current": None, "width_max": None, "replay_counter": None, "replay_rollover_counter": None},
        "clock_event_reasons": {},
        "utilization": {"gpu_pct": None, "memory_pct": None},
        "memory": {"total_mib": None, "used_mib": None},
        "ecc": {"current": None, "pending": None, "volatile": _counts(None, None, None),
                "aggregate": _counts(None, None, None), "sram_threshold_exceeded": None},
        "retired_pages": {"single_bit": None, "double_bit": None, "pending": None},
        "remapped_rows": None,
        "bad_pages": {"retired": None, "pending": None, "unreservable": None, "threshold": None},
        "ras_blocks": {},
        "temperature": {"gpu_c": None, "memory_c": None, "shutdown_c": None, "slowdown_c": None,
                        "max_operating_c": None, "memory_max_c": None, "tlimit_c": None, "shutdown_tlimit_c": None,
                        "slowdown_tlimit_c": None, "max_operating_tlimit_c": None,
                        "sensor": None, "edge_c": None, "hotspot_c": None},
        "power": {"draw_w": None, "limit_w": None, "default_limit_w": None, "min_limit_w": None, "max_limit_w": None},
        "clocks": _clocks(None, None), "max_clocks": _clocks(None, None),
        "applications_clocks": _clocks(None, None), "default_applications_clocks": _clocks(None, None),
        "fabric": {"state": None, "status": None},
        "partition": {"compute": None, "memory": None, "id": None},
        "xgmi": {"error_count": None, "error_status": None},
    }


def _counts(correctable: Any, uncorrectable: Any, deferred: Any, dram_correctable: Any = None,
            dram_uncorrectable: Any = None) -> dict[str, Any]:
    return {"correctable": correctable, "uncorrectable": uncorrectable, "deferred": deferred,
            "dram_correctable": dram_correctable, "dram_uncorrectable": dram_uncorrectable,
            "sram_correctable": None, "sram_uncorrectable": None}


def _clocks(graphics: Any, memory: Any) -> dict[str, Any]:
    # sm_mhz: AMD has no separate SM clock; the graphics (gfx/sclk) clock is what the checks compare.
    return {"graphics_mhz": graphics, "sm_mhz": graphics, "memory_mhz": memory}


def finish(record: dict[str, Any]) -> dict[str, Any]:
    """The record with every Unreadable moved into ``unreadable`` (the field itself None)."""
    unreadable: dict[str, str] = {}
    extra = record.pop("unreadable", None) or {}
    result = take_unreadable(record, "", unreadable)
    unreadable.update(extra)
    result["unreadable"] = unreadable
    return result


def set_temperatures(temp: dict[str, Any], edge: Any, hotspot: Any, memory: Any, limits: dict[str, Any]) -> None:
    """Fill the temperature block: the judged sensor is the hotspot (junction) where reported, else the edge,
    each against the device's own slowdown/shutdown limits for that sensor (``limits`` keyed like
    slowdown_hotspot, shutdown_edge, slowdown_vram)."""
    temp.update(edge_c=edge, hotspot_c=hotspot, memory_c=memory, memory_max_c=limits.get("slowdown_vram"))
    for sensor, value in (("hotspot", hotspot), ("edge", edge)):
        if value is not None and not isinstance(value, Unreadable):
            temp.update(sensor=sensor, gpu_c=value, slowdown_c=limits.get("slowdown_" + sensor),
                        shutdown_c=limits.get("shutdown_" + sensor))
            return
    # Nothing readable: an unreadable sensor is what the check must see.
    temp["gpu_c"] = hotspot if isinstance(hotspot, Unreadable) else edge


# ---------------------------------------------------------------- amd-smi


def run_json(binary: str, args: list[str], timeout: float) -> str:
    """One amd-smi subcommand's output; ProbeError when it fails."""
    rc, out, err = command.run([binary] + args, timeout)
    if rc != 0:
        raise ProbeError("amd-smi %s exited with rc %s: %s" % (" ".join(args), rc, first_line(err, out)))
    return out


def read_gpus(binary: str, timeout: float) -> dict[str, Any]:
    """``amd-smi list/static/metric --json``, each run once within one ``timeout`` and parsed together (parse_amd_smi).

    ProbeError when static or metric fails, times out or writes JSON that cannot be read; a failing ``list``
    leaves the PCI addresses to static (``bus.bdf``) and is noted in ``problems``.
    """
    problems = []
    listing = None
    # One deadline for the three calls, as nvidia-smi -q -x has for its one.
    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(0.001, deadline - time.monotonic())
    try:
        listing = run_json(binary, ["list", "--json"], left())
    except ProbeError as exc:
        if "timed out" in str(exc):
            raise
        problems.append(str(exc))
    static = run_json(binary, ["static", "--json"], left())
    metric = run_json(binary, ["metric", "--json"], left())
    try:
        inventory = parse_amd_smi(static, metric, listing)
    except AmdSmiParseError as exc:
        raise ProbeError("amd-smi returned unreadable JSON: %s" % exc) from None
    inventory["problems"] = problems + inventory["problems"]
    return inventory


_BDF = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
# The record fields only ``amd-smi metric`` fills: unreadable, never absent, on a GPU whose metric is missing.
_METRIC_FIELDS = ("temperature.gpu_c", "power.draw_w", "pcie.width_current", "pcie.gen_current", "utilization.gpu_pct",
                  "memory.used_mib", "clocks.graphics_mhz")


def _identity(item: dict[str, Any], what: str) -> dict[str, Any]:
    """{bdf, uuid, index} of one GPU object: its PCI address (``bdf``, ``bus.bdf``, or a ``gpu`` that is one), the
    UUID ``list`` gives, and the ``gpu`` index of this amd-smi run. AmdSmiParseError for a ``gpu`` that is neither."""
    raw = item.get("gpu")
    bdf = text(item.get("bdf")) or text(at(item, "bus", "bdf"))
    index = None
    if isinstance(raw, str) and _BDF.match(raw.strip()):
        bdf = bdf or raw.strip()
    elif isinstance(raw, int) and not isinstance(raw, bool):
        index = raw
    elif isinstance(raw, str) and raw.strip().isdigit() and len(raw.strip()) < 10:
        index = int(raw.strip())
    elif raw is not None:
        raise AmdSmiParseError("%s: GPU index %r is not a number" % (what, raw))
    uuid = text(item.get("uuid"))
    return {"bdf": _bdf_key(bdf), "uuid": uuid if isinstance(uuid, str) and uuid else None, "index": index}


def _bdf_key(bdf: Any) -> Optional[str]:
    """domain:bus:device.function in one spelling; the function is kept (partitions of one GPU differ only there)."""
    match = _BDF.match(bdf.strip()) if isinstance(bdf, str) else None
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return "%04x:%02x:%02x.%s" % (int(domain or "0", 16), int(bus, 16), int(device, 16), function)


class _Slot:
    """One GPU: what each amd-smi document says about it, matched by PCI address, then UUID, then index."""

    def __init__(self, identity: dict[str, Any]) -> None:
        self.identity = dict(identity)
        self.parts: dict[str, dict[str, Any]] = {}


def _match(slots: list[_Slot], identity: dict[str, Any], by_index: bool) -> Optional[_Slot]:
    """The slot with the same PCI address or UUID; by index only a slot sharing no stable key with the object."""
    unkeyed = []
    for slot in slots:
        common = [key for key in ("bdf", "uuid") if identity[key] and slot.identity[key]]
        if common and all(identity[key] == slot.identity[key] for key in common):
            return slot
        if not common:
            unkeyed.append(slot)
    if by_index and identity["index"] is not None:
        found = [slot for slot in unkeyed if slot.identity["index"] == identity["index"]]
        return found[0] if len(found) == 1 else None
    return None


def _pair(static: list[dict[str, Any]], metric: list[dict[str, Any]],
          listing: list[dict[str, Any]]) -> tuple[list[_Slot], list[str], bool]:
    """The GPUs of the three documents, each GPU's objects matched by a stable key: its PCI address (static's
    ``bus.bdf``, list's ``bdf``), else its UUID. The ``gpu`` index is used only where a document names nothing else
    (``metric`` never does), and only while the calls agree on which index is which GPU: list naming another
    address than static for an index, or metric listing other indexes than static, means the GPUs were enumerated
    differently between the calls (a GPU lost or back), and the metric is then matched to no GPU (its readings are
    unreadable, its error counts named in the problems). A GPU static or list alone names gets its own record.
    Returns (slots, problems, whether a metric matched to no GPU reports ECC errors)."""
    problems: list[str] = []
    unmatched_errors = False
    slots: list[_Slot] = []
    for item in static:
        slots.append(_Slot(_identity(item, "amd-smi static")))
        slots[-1].parts["static"] = item
    index_ok = True
    for item in listing:
        identity = _identity(item, "amd-smi list")
        found = _match(slots, identity, by_index=True)
        slot = found if found is not None else _Slot(identity)
        if found is None:
            slots.append(slot)
        elif identity["index"] is not None and slot.identity["index"] not in (None, identity["index"]):
            index_ok = False
            problems.append("amd-smi list calls %s GPU %s where amd-smi static calls it GPU %s" % (
                identity["bdf"], identity["index"], slot.identity["index"]))
        for key in ("bdf", "uuid", "index"):
            if slot.identity[key] is None:
                slot.identity[key] = identity[key]
        slot.parts["list"] = item
    identities = [_identity(item, "amd-smi metric") for item in metric]
    known = sorted(slot.identity["index"] for slot in slots if slot.identity["index"] is not None)
    by_index = sorted(identity["index"] for identity in identities if not (identity["bdf"] or identity["uuid"]))
    if slots and by_index and (set(by_index) != set(known) or len(set(by_index)) != len(by_index)):
        index_ok = False
        problems.append("amd-smi static/list list GPUs %s, amd-smi metric GPUs %s" % (
            ", ".join(str(i) for i in known) or "none", ", ".join(str(i) for i in by_index)))
    if not index_ok:
        problems.append("the GPUs were enumerated differently between the amd-smi calls: amd-smi metric, which names "
                        "GPUs by index only, is matched to none of them")
    for item, identity in zip(metric, identities):
        found = _match(slots, identity, by_index=index_ok)
        if found is not None and "metric" not in found.parts:
            found.parts["metric"] = item
        elif not static and not listing:
            # Neither static nor list names a GPU: the metric's GPUs are the records.
            slots.append(_Slot(identity))
            slots[-1].parts["metric"] = item
        else:
            errors = [(kind, _ecc_total(item.get("ecc"), kind)) for kind in ("uncorrectable", "deferred")]
            named = ", ".join("%s %s" % (count, kind) for kind, count in errors if isinstance(count, (int, float)) and count)
            unmatched_errors = unmatched_errors or bool(named)
            problems.append("amd-smi metric GPU %s matched no GPU%s" % (
                identity["bdf"] or identity["uuid"] or identity["index"], " and reports %s ECC errors" % named if named else ""))
    return slots, problems, unmatched_errors


def parse_amd_smi(static_text: str, metric_text: str, list_text: Optional[str] = None) -> dict[str, Any]:
    """``amd-smi static --json`` + ``metric --json`` (+ ``list --json``) -> a GPU inventory (vendor amd).

    {"vendor", "source", "driver_version", "driver_kind", "kernel_release", "tool_version", "gpus",
     "unreadable", "problems"}; AmdSmiParseError when a document is not amd-smi JSON. GPUs are matched across the
    documents by PCI address or UUID, by index only where a document has nothing else (_pair).
    """
    static = gpu_list(load_json(static_text, "amd-smi static"), "amd-smi static")
    metric = gpu_list(load_json(metric_text, "amd-smi metric"), "amd-smi metric")
    listing: list[dict[str, Any]] = []
    problems = []
    if list_text is not None:
        try:
            listing = gpu_list(load_json(list_text, "amd-smi list"), "amd-smi list")
            for item in listing:
                _identity(item, "amd-smi list")
        except AmdSmiParseError as exc:
            problems.append(str(exc))
            listing = []
    slots, pairing, unmatched_errors = _pair(static, metric, listing)
    problems += pairing
    slots.sort(key=lambda slot: (slot.identity["index"] is None, slot.identity["index"] or 0, slot.identity["bdf"] or ""))
    gpus = []
    for position, slot in enumerate(slots):
        index = slot.identity["index"] if slot.identity["index"] is not None else position
        missing = None
        if "metric" not in slot.parts:
            # Static or list names the GPU, metric does not (even when metric lists no GPU at all): lost between
            # the calls, its readings are unknown.
            missing = "not in amd-smi metric%s" % (
                " (the GPUs were enumerated differently between the amd-smi calls)" if pairing
                else "" if metric else " (it lists no GPU)")
        gpus.append(_gpu(index, slot.parts.get("static", {}), slot.parts.get("metric", {}), slot.parts.get("list", {}),
                         missing, unmatched_errors))
    versions = [_first(at(slot.parts.get("static"), "driver"), "version", "driver_version") for slot in slots]
    driver_version, kind, kernel = driver_identity(next((v for v in versions if not absent(v)), None))
    return {"vendor": VENDOR, "source": "amd-smi", "driver_version": driver_version, "driver_kind": kind,
            "kernel_release": kernel, "gpus": gpus, "unreadable": {}, "problems": problems}


_DKMS_VERSION = re.compile(r"^\d+\.\d+(\.\d+)*$")
_BANNER = re.compile(r"^Linux ?version ?(\S+?)(?:\(|\s|$)")


def driver_identity(raw: Any) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """(DKMS driver version or None, "dkms" | "in-box" | None, kernel release or None) from a driver version text.

    The ROCm-packaged (DKMS) amdgpu has its own numbering (6.10.5); with the distribution's in-box driver amd-smi
    reports the kernel banner with spaces removed ("Linuxversion6.14.0-24-generic(buildd@...") and rocm-smi the
    kernel release ("6.8.12-4-pve").
    """
    value = text(raw)
    if not isinstance(value, str):
        return None, None, None
    banner = _BANNER.match(value)
    if banner:
        return None, "in-box", banner.group(1)
    if _DKMS_VERSION.match(value):
        return value, "dkms", None
    if re.match(r"^\d+\.\d+\.\d+-", value):
        return None, "in-box", value
    return None, None, None


def _gpu(index: int, static: dict[str, Any], metric: dict[str, Any], listing: dict[str, Any],
         missing_metric: Optional[str] = None, errors_elsewhere: bool = False) -> dict[str, Any]:
    record = empty_record(index)
    asic, bus, board = static.get("asic"), static.get("bus"), static.get("board")
    name = text(at(asic, "market_name"))
    product = text(at(board, "product_name"))
    record.update(
        pci_bus_id=text(listing.get("bdf")) or text(at(bus, "bdf")) or text(at(static, "bdf")),
        uuid=text(listing.get("uuid")) or text(at(asic, "asic_serial")),
        name=product if isinstance(product, str) and product else name if isinstance(name, str) and name
        else "AMD GPU %s" % (text(at(asic, "device_id")) or index),
        architecture=text(at(asic, "target_graphics_version")),
        serial=text(at(board, "product_serial")) if text(at(board, "product_serial")) not in ("0",) else None,
        board_part_number=text(at(board, "model_number")),
        vbios_version=text(at(static, "vbios", "version")) or text(at(static, "vbios", "part_number"))
        or text(at(static, "ifwi", "version")) or text(at(static, "vbios", "name")),
        performance_state=text(metric.get("perf_level")),
    )
    partition = static.get("partition")
    record["partition"] = {
        "compute": text(at(partition, "compute_partition")) or text(at(partition, "accelerator_partition")),
        "memory": text(at(partition, "memory_partition")),
        "id": number(listing.get("partition_id")) if "partition_id" in listing else number(at(partition, "partition_id")),
    }
    # Only a GPU's first partition reports its sensors and ECC counts (the others write "N/A" by design). amd-smi
    # of ROCm 6.0 to 6.2 names no partition id: a GPU split into partitions then may be any of them.
    partition_id, compute = record["partition"]["id"], record["partition"]["compute"]
    primary = partition_id == 0 or (partition_id is None and (compute is None or compute.upper() == "SPX"))
    _static_limits(record, static)
    _metric_values(record, metric, primary)
    _ras(record, static, metric, primary)
    if missing_metric:
        # The metric document lists GPUs, but none is this one: its readings are unknown, not absent (its ECC
        # counts too where ECC is on, or where a metric matched to no GPU reports errors).
        ecc = record["ecc"]["current"] == "Enabled" or errors_elsewhere
        fields = _METRIC_FIELDS + (("ecc.volatile",) if ecc else ())
        record["unreadable"] = dict((field, missing_metric) for field in fields)
    return finish(record)


# amd-smi renamed its JSON keys between releases; each reading is looked up under every spelling, the current one
# first (AMD's CLI, ROCm/amdsmi amdsmi_cli/amdsmi_commands.py at the tags rocm-6.0.0, rocm-6.1.0, rocm-6.2.0):
# ROCm 6.0 wrote power.current_power, pcie.current_lanes / current_speed, ecc.total_uncorrectable, ecc_block,
# usage.gfx_usage / mem_usage, clocks gfx / MEM with cur_clk, static limit.current_power, driver.driver_version and
# vram.vram_size_mb; ROCm 6.0 to 6.1.1 name the clocks gfx / MEM, later releases gfx_0 / mem_0.
_DRAW = ("socket_power", "average_socket_power", "current_power")
_CAP = ("socket_power", "power_cap", "current_power")
# xgmi_err is the library's status name in every release (amdsmi_xgmi_status_t), else "N/A"; the two fault names
# report a link error (gpu.xgmi FAILs on them), NO_ERRORS reads as a count of 0.
_XGMI_STATUS = "AMDSMI_XGMI_STATUS_"
XGMI_OK = "AMDSMI_XGMI_STATUS_NO_ERRORS"
XGMI_FAULTS = ("AMDSMI_XGMI_STATUS_ERROR", "AMDSMI_XGMI_STATUS_MULTIPLE_ERRORS")
# "N/A" where amd-smi static says the value exists: amd-smi writes "N/A" for any failed library call, so on a GPU
# whose static output gives temperature limits or ECC state, an all-"N/A" reading is a failed read, not a missing
# sensor.
_NA_DESPITE = "N/A, although amd-smi static %s"


def _reading(tree: Any, *keys: str) -> Any:
    """The number under the first of ``keys`` that holds one (an Unreadable counts); None when none does."""
    for key in keys:
        value = number(at(tree, key))
        if value is not None:
            return value
    return None


def no_cap(value: Any) -> Any:
    """A power cap or its maximum; 0 W is no cap, None (an APU writes 0 W for its maximum, minimum and cap in amd-smi
    static; rocm-smi gives an MI250's second die a 0.0 W cap)."""
    return None if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0 else value


def _ecc_total(ecc: Any, kind: str) -> Any:
    """metric.ecc's total of ``kind`` (correctable, uncorrectable, deferred) under each release's spelling."""
    return _reading(ecc, "total_%s_count" % kind, "total_%s" % kind, kind)


def _static_limits(record: dict[str, Any], static: dict[str, Any]) -> None:
    bus, limit = static.get("bus"), static.get("limit")
    speed = number(at(bus, "max_pcie_speed"))
    if isinstance(speed, (int, float)) and speed > 1000:
        speed = speed / 1000.0  # some releases give MT/s
    record["pcie"].update(width_max=number(at(bus, "max_pcie_width")), gen_max=gen_of(speed))
    if record["pcie"]["gen_max"] is None:
        version = text(at(bus, "pcie_interface_version"))
        match = re.search(r"(\d+)", version) if isinstance(version, str) else None
        record["pcie"]["gen_max"] = int(match.group(1)) if match else None
    # Newer releases nest the caps per power limit type: limit.ppt0.{socket,max,min}_power_limit.
    ppt0 = at(limit, "ppt0")
    cap, top, bottom = (_reading(ppt0, "%s_power_limit" % name) for name in ("socket", "max", "min"))
    record["power"].update(limit_w=no_cap(_reading(limit, *_CAP) if cap is None else cap),
                           min_limit_w=_reading(limit, "min_power") if bottom is None else bottom,
                           max_limit_w=no_cap(_reading(limit, "max_power") if top is None else top))
    # The VRAM limits are spelt slowdown_vram_temperature or slowdown_mem_temperature depending on the release.
    record["_limits"] = dict(("%s_%s" % (kind, sensor), number(_first(limit, *("%s_%s_temperature" % (kind, name) for name in names))))
                             for kind in ("slowdown", "shutdown")
                             for sensor, names in (("edge", ("edge",)), ("hotspot", ("hotspot", "junction")),
                                                   ("vram", ("vram", "mem"))))
    record["memory"]["total_mib"] = _reading(static.get("vram"), "size", "vram_size_mb")


def _metric_values(record: dict[str, Any], metric: dict[str, Any], primary: bool) -> None:
    limits = dict((k, v) for k, v in record.pop("_limits", {}).items() if not isinstance(v, Unreadable))
    temps = metric.get("temperature")
    set_temperatures(record["temperature"], number(at(temps, "edge")), number(at(temps, "hotspot")),
                     number(at(temps, "mem")), limits)
    temperature = record["temperature"]
    if primary and "temperature" in metric and all(temperature[key] is None for key in ("edge_c", "hotspot_c", "memory_c")) \
            and any(isinstance(value, (int, float)) and value > 0 for key, value in limits.items() if "vram" not in key):
        temperature["gpu_c"] = Unreadable(_NA_DESPITE % "gives the GPU's temperature limits")
    power = metric.get("power")
    # Socket power "N/A" under a cap is no contradiction: a guest VM has no power reading but may set the cap.
    record["power"]["draw_w"] = _reading(power, *_DRAW)
    throttle = text(at(power, "throttle_status"))
    if isinstance(throttle, str):
        record["clock_event_reasons"] = {"throttled": throttle.upper() == "THROTTLED"}
    pcie = metric.get("pcie")
    speed = _reading(pcie, "speed", "current_speed")
    if isinstance(speed, (int, float)) and speed > 1000:
        speed = speed / 1000.0
    record["pcie"].update(width_current=_reading(pcie, "width", "current_lanes"), gen_current=gen_of(speed),
                          replay_counter=number(at(pcie, "replay_count")),
                          replay_rollover_counter=_reading(pcie, "replay_roll_over_count", "replay_rollover_count"))
    usage = metric.get("usage")
    record["utilization"] = {"gpu_pct": _reading(usage, "gfx_activity", "gfx_usage"),
                             "memory_pct": _reading(usage, "umc_activity", "mem_usage")}
    memory = metric.get("mem_usage")
    if at(memory, "total_vram") is not None:
        record["memory"]["total_mib"] = number(at(memory, "total_vram"))
    record["memory"]["used_mib"] = number(at(memory, "used_vram"))
    clock = metric.get("clock")
    gfx, mem = _first(clock, "gfx_0", "gfx"), _first(clock, "mem_0", "MEM")
    record["clocks"] = _clocks(_reading(gfx, "clk", "cur_clk"), _reading(mem, "clk", "cur_clk"))
    record["max_clocks"] = _clocks(number(at(gfx, "max_clk")), number(at(mem, "max_clk")))
    record["xgmi"] = _xgmi(metric.get("xgmi_err"))


def _xgmi(raw: Any) -> dict[str, Any]:
    """{error_count, error_status} from xgmi_err: a status name (NO_ERRORS reads as 0 errors), a count, or an
    object; a status name amd-smi does not have is unreadable."""
    if isinstance(raw, str) and raw.strip().upper().startswith(_XGMI_STATUS):
        status = raw.strip().upper()
        if status == XGMI_OK:
            return {"error_count": 0, "error_status": status}
        if status in XGMI_FAULTS:
            return {"error_count": None, "error_status": status}
        return {"error_count": Unreadable(shorten(raw.strip())), "error_status": None}
    return {"error_count": number(raw) if not isinstance(raw, dict) or "value" in raw else None,
            "error_status": text(at(raw, "status")) if isinstance(raw, dict) else None}


def _first(tree: Any, *keys: str) -> Any:
    """The first of keys present in an object (names differ between amd-smi releases)."""
    for key in keys:
        if isinstance(tree, dict) and key in tree:
            return tree[key]
    return None


def _enabled(state: Any) -> Optional[bool]:
    value = text(state)
    if not isinstance(value, str):
        return None
    return value.upper() == "ENABLED"


def _ras(record: dict[str, Any], static: dict[str, Any], metric: dict[str, Any], primary: bool) -> None:
    """ECC counts since driver load (metric.ecc totals, metric.ecc_blocks per block), kept where the static RAS
    section says ECC is enabled on some block: on parts without it (Radeon) the zero counts mean nothing. An
    uncorrectable or deferred count above zero is kept whatever the RAS state reads ("N/A", DISABLED, no static):
    a reported error is never dropped (ecc.current then says what the state read, for the check to name). With
    ECC enabled, "N/A" totals are the blocks' sum, else unreadable."""
    ras = static.get("ras")
    states = at(ras, "ecc_block_state")
    if isinstance(states, list):
        # Some releases list the blocks: [{"block": "UMC", "status": "ENABLED"}, ...].
        states = dict((item.get("block"), item.get("status", item.get("state"))) for item in states if isinstance(item, dict))
    enabled = dict((str(block).upper(), _enabled(state)) for block, state in states.items()) if isinstance(states, dict) else {}
    threshold = number(at(ras, "bad_page_threshold"))
    record["bad_pages"]["threshold"] = threshold
    any_enabled = any(enabled.values())
    record["ecc"]["current"] = "Enabled" if any_enabled else ("Disabled" if enabled else None)
    blocks = _first(metric, "ecc_blocks", "ecc_block")
    per_block: dict[str, Any] = {}
    if isinstance(blocks, dict):
        for block, counts in blocks.items():
            per_block[block.upper()] = {"enabled": enabled.get(block.upper()),
                                        "correctable": _reading(counts, "correctable_count", "correctable"),
                                        "uncorrectable": _reading(counts, "uncorrectable_count", "uncorrectable"),
                                        "deferred": _reading(counts, "deferred_count", "deferred")}
    record["ras_blocks"] = per_block
    ecc = metric.get("ecc")
    memory = per_block.get(_MEMORY_BLOCK) or {}
    counts = _counts(_ecc_total(ecc, "correctable"), _ecc_total(ecc, "uncorrectable"), _ecc_total(ecc, "deferred"),
                     memory.get("correctable"), memory.get("uncorrectable"))
    blocks_bad = [c for c in per_block.values() for kind in ("uncorrectable", "deferred")
                  if isinstance(c[kind], (int, float)) and c[kind] > 0]
    reported = [counts[kind] for kind in ("uncorrectable", "deferred", "dram_uncorrectable")
                if isinstance(counts[kind], (int, float)) and counts[kind] > 0]
    block_uncorrectable = [c["uncorrectable"] for c in per_block.values() if isinstance(c["uncorrectable"], (int, float))]
    if any_enabled:
        if counts["uncorrectable"] is None and block_uncorrectable:
            counts["uncorrectable"] = sum(block_uncorrectable)
        elif counts["uncorrectable"] is None and primary and "ecc" in metric:
            counts["uncorrectable"] = Unreadable(_NA_DESPITE % "reads ECC as enabled")
        record["ecc"]["volatile"] = counts
    elif reported or blocks_bad:
        if counts["uncorrectable"] is None and blocks_bad:
            counts["uncorrectable"] = sum(block_uncorrectable)
        record["ecc"]["volatile"] = counts
        record["ecc"]["current"] = record["ecc"]["current"] or "Unknown"
