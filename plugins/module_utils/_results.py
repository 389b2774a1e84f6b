# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The host result schema shared by doctor, the callback and the fleet report.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import STATUSES

SCHEMA_VERSION = "1.2.0"


def finding(status: str, message: str, details: Optional[Mapping[str, Any]] = None, remediation: Optional[str] = None) -> dict[str, Any]:
    """What a check function returns: a verdict with its evidence."""
    if status not in STATUSES:
        raise ValueError("status %r is not one of %s" % (status, ", ".join(STATUSES)))
    return {"status": status, "message": message, "details": details or {}, "remediation": remediation}


def summarize(checks: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Counts per status, every status present (0 when absent)."""
    counts = {status: 0 for status in STATUSES}
    for check in checks:
        counts[check["status"]] += 1
    return counts


def gpu_ref(gpu: Mapping[str, Any]) -> dict[str, Any]:
    """How every per-GPU finding names its GPU (gpu_name() writes it for people)."""
    return {"index": gpu.get("index"), "pci_bus_id": gpu.get("pci_bus_id"), "uuid": gpu.get("uuid"), "name": gpu.get("name")}


def _known(value: Any) -> bool:
    return value is not None and value != "" and not isinstance(value, bool)


def gpu_name(gpu: Mapping[str, Any]) -> str:
    """A GPU as people read it, by every identity known: index, PCI address, UUID (the serial when there is no UUID).

    "GPU 3 00000000:19:00.0 GPU-8ba1..."; "GPU at 0000:19:00" when the kernel log gave an address but no index;
    "GPU serial 1324..." with neither; "GPU (not named)" when the record names nothing. Never "None"."""
    index, address, uuid, serial = (gpu.get(k) for k in ("index", "pci_bus_id", "uuid", "serial"))
    parts = ["GPU %s" % index if _known(index) else "GPU at %s" % address if _known(address) else "GPU"]
    if _known(index) and _known(address):
        parts.append(str(address))
    if _known(uuid):
        parts.append(str(uuid))
    elif _known(serial):
        parts.append("serial %s" % serial)
    return " ".join(parts) if len(parts) > 1 or parts[0] != "GPU" else "GPU (not named)"
