# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""NVLink error counters per GPU and link: from NVML (nvmlDeviceGetNvLinkErrorCounter) or ``nvidia-smi nvlink -e``.

Both give the same record: [{index, name, uuid, pci_bus_id, links: {link number as text: {counter: value}}, unreadable:
{"link N counter": why}}]. Counter names are the tool's words in snake case: NVML's replay_errors,
recovery_errors, crc_flit_errors, crc_data_errors, ecc_data_errors; nvidia-smi's "Replay Errors", "Recovery
Errors", "CRC Errors" (Hopper and earlier) become replay_errors, recovery_errors, crc_errors. Newer drivers print
more lines per link (Blackwell: "Symbol Errors", "Link recovery failed events"...): every line whose name speaks
of errors, recoveries, replays or discards is kept, data and packet counts are not. NVML's counters are 64-bit
(unsigned long long) and reset when the driver loads or ``nvidia-smi nvlink -r`` clears them.

``nvidia-smi nvlink -e`` is read line by line (_host/lines.py): a line that cannot be read is skipped and
counted, "N/A" (no such counter on this GPU) is left out, and link lines under a GPU line that could not be
read are not given to the GPU above it.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvml import as_text
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import LINE_ERRORS, BadLine, BadLines

# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"; recent drivers may name a GPU by its bus id: "GPU 00000008:06:00.0".
_GPU_HEADER = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]*)\).*)?$")
_GPU_BUS_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_COUNTER = re.compile(r"^Link (\d+): ([A-Za-z][^:]*?)\s*:\s*(\S+)$")
_WORDS = ("error", "recovery", "replay", "discard")
_NO_VALUE = frozenset(("n/a", "not supported", "[n/a]"))
# NVML's nvmlNvLinkErrorCounter_t values and the names the record gives them.
NVML_COUNTERS = (("NVML_NVLINK_ERROR_DL_REPLAY", "replay_errors"), ("NVML_NVLINK_ERROR_DL_RECOVERY", "recovery_errors"),
                 ("NVML_NVLINK_ERROR_DL_CRC_FLIT", "crc_flit_errors"), ("NVML_NVLINK_ERROR_DL_CRC_DATA", "crc_data_errors"),
                 ("NVML_NVLINK_ERROR_DL_ECC_DATA", "ecc_data_errors"))


def counter_name(label: str) -> str:
    """"Replay Errors" -> "replay_errors"; "FEC Errors - 0" -> "fec_errors_0"."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def parse_nvlink_errors(text: Optional[str], bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -e`` -> the record above (pci_bus_id from a bus-id GPU line, else None)."""
    bad = BadLines() if bad is None else bad
    gpus: list[dict[str, Any]] = []
    current: Optional[dict[str, Any]] = None
    for number, raw in enumerate((text or "").splitlines(), 1):
        line = raw.strip()
        try:
            if line.startswith("GPU "):
                current = None
                header = _GPU_HEADER.match(line)
                by_bus = _GPU_BUS_HEADER.match(line)
                if header:
                    current = {"index": int(header.group(1)), "name": header.group(2), "uuid": header.group(3),
                               "pci_bus_id": None, "links": {}, "unreadable": {}}
                elif by_bus:
                    current = {"index": None, "name": None, "uuid": None, "pci_bus_id": by_bus.group(1), "links": {},
                               "unreadable": {}}
                else:
                    raise BadLine("a GPU line of no known form")
                gpus.append(current)
                continue
            counter = _COUNTER.match(line)
            if not counter:
                continue  # blank lines, "[...]", data lines of another form
            if current is None:
                raise BadLine("a link line of no GPU (its GPU line is missing or could not be read)")
            name = counter_name(counter.group(2))
            if not any(word in name for word in _WORDS):
                continue
            value = counter.group(3)
            if value.lower() in _NO_VALUE:
                continue
            if not value.isdigit() or len(value) > 20:
                raise BadLine("%r is not a count" % value[:40])
            current["links"].setdefault(str(int(counter.group(1))), {})[name] = int(value)
        except LINE_ERRORS as exc:
            bad.add(number, raw, exc)
    return gpus


def nvml_nvlink_errors(pynvml: Any) -> list[dict[str, Any]]:
    """Within an NVML session (gpus/nvml.session): every GPU's NVLink error counters, the record above."""
    gpus = []
    counters = [(getattr(pynvml, constant), name) for constant, name in NVML_COUNTERS if hasattr(pynvml, constant)]
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        links: dict[str, dict[str, int]] = {}
        unreadable: dict[str, str] = {}
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                pynvml.nvmlDeviceGetNvLinkState(handle, link)
            except pynvml.NVMLError:
                continue  # not supported, or past this GPU's last link
            values: dict[str, int] = {}
            for counter, name in counters:
                try:
                    values[name] = int(pynvml.nvmlDeviceGetNvLinkErrorCounter(handle, link, counter))
                except pynvml.NVMLError_NotSupported:
                    continue
                except pynvml.NVMLError as exc:
                    unreadable["link %d %s" % (link, name)] = "%s: %s" % (type(exc).__name__, exc)
            links[str(link)] = values
        gpus.append({"index": index, "name": as_text(pynvml.nvmlDeviceGetName(handle)),
                     "uuid": as_text(pynvml.nvmlDeviceGetUUID(handle)),
                     "pci_bus_id": as_text(pynvml.nvmlDeviceGetPciInfo(handle).busId), "links": links, "unreadable": unreadable})
    return gpus
