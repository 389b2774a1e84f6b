# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""NVIDIA PCI functions from sysfs, and one spelling for every PCI address.

nvidia-smi writes ``00000000:3B:00.0``, sysfs ``0000:3b:00.0`` and the kernel
log ``PCI:0000:3b:00``; pci_key() turns each into ``0000:3b:00`` so they compare.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import re
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none

NVIDIA_VENDOR = "0x10de"

_ADDRESS = re.compile(r"(?:PCI:)?(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-7])?$")


def pci_key(address: Optional[str]) -> Optional[str]:
    """``domain:bus:device`` in lower case with a 4-digit domain, or None when address is not one."""
    match = _ADDRESS.match((address or "").strip())
    if not match:
        return None
    domain, bus, device = match.groups()
    return "%04x:%02x:%02x" % (int(domain or "0", 16), int(bus, 16), int(device, 16))


def classify(pci_class: Optional[str]) -> Optional[str]:
    """Which list an NVIDIA PCI function belongs in, from its class code ('0x030200'): gpus, nvswitches or None."""
    value = (pci_class or "").strip().lower()
    if value.startswith("0x03"):
        # 0x0300 VGA, 0x0302 3D controller (data-centre GPUs), 0x0380 other display.
        return "gpus"
    if value.startswith("0x0680"):
        # NVSwitch presents itself as a bridge of class "other".
        return "nvswitches"
    return None


def _read(path: str) -> Optional[str]:
    text = read_text_or_none(path)
    return text.strip() if text is not None else None


def scan_nvidia_functions(devices_dir: str) -> dict[str, list[dict[str, Any]]]:
    """NVIDIA GPU and NVSwitch functions under a sysfs ``bus/pci/devices`` directory, sorted by address."""
    found: dict[str, list[dict[str, Any]]] = {"gpus": [], "nvswitches": []}
    for address in sorted(os.listdir(devices_dir)):
        path = os.path.join(devices_dir, address)
        if _read(os.path.join(path, "vendor")) != NVIDIA_VENDOR:
            continue
        pci_class = _read(os.path.join(path, "class"))
        group = classify(pci_class)
        if group is None:
            continue  # the GPUs' HDMI audio and USB functions
        driver = os.path.join(path, "driver")
        found[group].append({
            "address": address,
            "device_id": _read(os.path.join(path, "device")),
            "class": pci_class,
            # Which kernel driver owns it: nvidia, vfio-pci (handed to a VM) or none.
            "driver": os.path.basename(os.readlink(driver)) if os.path.islink(driver) else None,
        })
    return found
