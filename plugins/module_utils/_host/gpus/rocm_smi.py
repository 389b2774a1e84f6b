# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""rocm-smi (deprecated in favour of amd-smi, still the only tool on older ROCm): ``rocm-smi --showallinfo --json``,
run once, parsed into the GPU records _host/gpus/__init__.py documents (vendor "amd").

The JSON is flat: one object per ``cardN`` plus ``system``, every value a string, the unit inside the key name
("Temperature (Sensor edge) (C)": "53.0"). Key names changed across ROCm releases: ``Card series`` (<= 5.7) became
``Card Series`` with ``Device Name`` (>= 6.1), ROCm 4.3 printed "0x1002" there; ``GPU memory use (%)`` became ``GPU
Memory Allocated (VRAM%)``; MI300 reports ``Current Socket Graphics Package Power (W)`` instead of ``Average
Graphics Package Power (W)``. A dual-die MI250 prints "N/A (Secondary die)" where one die has no power reading. The
output can be degraded without an error (no temperature, power or PCIe at all): those values are None, never a
default. rocm-smi has no RAS/ECC counts and no temperature limits in JSON: those stay None here.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import (
    VENDOR,
    AmdSmiParseError,
    driver_identity,
    empty_record,
    finish,
    load_json,
    no_cap,
    number,
    set_temperatures,
    text,
)
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import Unreadable, first_line
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pcie_gen

_CARD = re.compile(r"^card(\d+)$")
_LINK = re.compile(r"([\d.]+)\s*GT/s\s*x(\d+)", re.IGNORECASE)
_MHZ = re.compile(r"(\d+(?:\.\d+)?)\s*Mhz", re.IGNORECASE)
_RANGE = re.compile(r"(\d+)\s*Mhz\s*-\s*(\d+)\s*Mhz", re.IGNORECASE)
# Placeholders rocm-smi 4.3 printed where a name belongs.
_PLACEHOLDER_NAMES = ("0x1002",)


def read_gpus(binary: str, timeout: float) -> dict[str, Any]:
    """``rocm-smi --showallinfo --json`` run once and parsed; ProbeError when it fails or its JSON is unreadable."""
    rc, out, err = command.run([binary, "--showallinfo", "--json"], timeout)
    if rc != 0:
        raise ProbeError("rocm-smi --showallinfo --json exited with rc %s: %s" % (rc, first_line(err, out)))
    try:
        return parse_rocm_smi(out)
    except AmdSmiParseError as exc:
        raise ProbeError("rocm-smi returned unreadable JSON: %s" % exc) from None


def _get(card: dict[str, Any], *keys: str) -> Any:
    """The first of keys present in the card (key names changed across releases), compared case-insensitively."""
    lowered = dict((key.lower(), value) for key, value in card.items())
    for key in keys:
        if key.lower() in lowered:
            return lowered[key.lower()]
    return None


def _power(raw: Any) -> Any:
    """'91.0' -> 91.0; 'N/A (Secondary die)' -> None (the package's power is read on the other die)."""
    if isinstance(raw, str) and raw.strip().lower().startswith("n/a"):
        return None
    return number(raw)


def parse_rocm_smi(output: str) -> dict[str, Any]:
    """rocm-smi JSON -> {"vendor", "source", "driver_version", "driver_kind", "kernel_release", "gpus", ...}."""
    document = load_json(output, "rocm-smi")
    if not isinstance(document, dict):
        raise AmdSmiParseError("rocm-smi: expected an object of cardN entries, got %s" % type(document).__name__)
    cards = sorted(((int(match.group(1)), value) for key, value in document.items()
                    for match in [_CARD.match(key)] if match), key=lambda item: item[0])
    if not cards and not isinstance(document.get("system"), dict):
        raise AmdSmiParseError("rocm-smi: no cardN entry and no system entry (keys: %s)" % ", ".join(sorted(document)[:5]))
    gpus = []
    for position, (number_, card) in enumerate(cards):
        if not isinstance(card, dict):
            raise AmdSmiParseError("rocm-smi: card%d is %s, not an object" % (number_, type(card).__name__))
        gpus.append(_card(position, number_, card))
    raw_system = document.get("system")
    system: dict[str, Any] = raw_system if isinstance(raw_system, dict) else {}
    driver_version, kind, kernel = driver_identity(_get(system, "Driver version"))
    return {"vendor": VENDOR, "source": "rocm-smi", "driver_version": driver_version, "driver_kind": kind,
            "kernel_release": kernel, "gpus": gpus, "unreadable": {}, "problems": []}


def _name(card: dict[str, Any]) -> Any:
    for key in ("Device Name", "Card Series", "Card series"):
        value = text(_get(card, key))
        if isinstance(value, str) and value and value.lower() not in _PLACEHOLDER_NAMES:
            return value
    device = text(_get(card, "Device ID", "GPU ID"))
    return "AMD GPU %s" % device if isinstance(device, str) and device else "AMD GPU"


def _card(index: int, card_number: int, card: dict[str, Any]) -> dict[str, Any]:
    record = empty_record(index)
    unique = text(_get(card, "Unique ID"))
    record.update(
        card=card_number,
        pci_bus_id=text(_get(card, "PCI Bus")),
        uuid=unique,
        name=_name(card),
        architecture=text(_get(card, "GFX Version")),
        serial=text(_get(card, "Serial Number")),
        vbios_version=text(_get(card, "VBIOS version")),
        performance_state=text(_get(card, "Performance Level")),
    )
    set_temperatures(record["temperature"], number(_get(card, "Temperature (Sensor edge) (C)")),
                     number(_get(card, "Temperature (Sensor junction) (C)")),
                     number(_get(card, "Temperature (Sensor memory) (C)")), {})
    draw = _power(_get(card, "Average Graphics Package Power (W)"))
    if draw is None:
        draw = _power(_get(card, "Current Socket Graphics Package Power (W)"))
    record["power"].update(draw_w=draw, limit_w=no_cap(_power(_get(card, "Max Graphics Package Power (W)"))))
    record["utilization"] = {"gpu_pct": number(_get(card, "GPU use (%)")),
                             "memory_pct": number(_get(card, "GPU Memory Read/Write Activity (%)"))}
    total, used = number(_get(card, "VRAM Total Memory (B)")), number(_get(card, "VRAM Total Used Memory (B)"))
    record["memory"] = {"total_mib": _mib(total), "used_mib": _mib(used)}
    record["pcie"].update(replay_counter=number(_get(card, "PCIe Replay Count")))
    link = text(_get(card, "pcie clock level"))
    if isinstance(link, str):
        match = _LINK.search(link)
        if match:
            record["pcie"].update(gen_current=pcie_gen(float(match.group(1))),
                                  width_current=int(match.group(2)))
        else:
            record["pcie"]["width_current"] = Unreadable(link)
    sclk, mclk = _mhz(_get(card, "sclk clock speed:")), _mhz(_get(card, "mclk clock speed:"))
    record["clocks"].update(graphics_mhz=sclk, sm_mhz=sclk, memory_mhz=mclk)
    sclk_max, mclk_max = _top(_get(card, "Valid sclk range")), _top(_get(card, "Valid mclk range"))
    record["max_clocks"].update(graphics_mhz=sclk_max, sm_mhz=sclk_max, memory_mhz=mclk_max)
    record["partition"].update(compute=text(_get(card, "Current Compute Partition", "Compute Partition")),
                               memory=text(_get(card, "Current Memory Partition", "Memory Partition")))
    return finish(record)


def _mib(value: Any) -> Any:
    return value // (1024 * 1024) if isinstance(value, int) else value


def _mhz(raw: Any) -> Any:
    """'(800Mhz)' -> 800; None when absent; Unreadable for other text."""
    value = text(raw)
    if not isinstance(value, str):
        return value
    match = _MHZ.search(value)
    return int(float(match.group(1))) if match else Unreadable(value)


def _top(raw: Any) -> Any:
    """'500Mhz - 1700Mhz' -> 1700."""
    value = text(raw)
    if not isinstance(value, str):
        return value
    match = _RANGE.search(value)
    return int(match.group(2)) if match else None
