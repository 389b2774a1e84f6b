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
AMD_VENDOR = "0x1002"

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


def is_amd_gpu_class(pci_class: Optional[str]) -> bool:
    """An AMD GPU's class code: a display controller (0x03xx) or a processing accelerator (0x12xx: MI300X is not a
    VGA device)."""
    value = (pci_class or "").strip().lower()
    return value.startswith("0x03") or value.startswith("0x12")


def gpu_vendor(vendor_id: Optional[str], pci_class: Optional[str]) -> Optional[str]:
    """'NVIDIA' or 'AMD' when a PCI function (its vendor and class codes as sysfs writes them) is a GPU, else None."""
    vendor = (vendor_id or "").strip().lower()
    if vendor == NVIDIA_VENDOR:
        return "NVIDIA" if classify(pci_class) == "gpus" else None
    if vendor == AMD_VENDOR:
        return "AMD" if is_amd_gpu_class(pci_class) else None
    return None


def scan_amd_gpus(devices_dir: str) -> list[dict[str, Any]]:
    """AMD GPU functions under a sysfs ``bus/pci/devices`` directory: [{address, device_id, class, driver}], sorted;
    [] when the directory is not there."""
    found: list[dict[str, Any]] = []
    if not os.path.isdir(devices_dir):
        return found
    for address in sorted(os.listdir(devices_dir)):
        path = os.path.join(devices_dir, address)
        if _read(os.path.join(path, "vendor")) != AMD_VENDOR:
            continue
        pci_class = _read(os.path.join(path, "class"))
        if not is_amd_gpu_class(pci_class):
            continue
        driver = os.path.join(path, "driver")
        found.append({"address": address, "device_id": _read(os.path.join(path, "device")), "class": pci_class,
                      "driver": os.path.basename(os.readlink(driver)) if os.path.islink(driver) else None})
    return found


def read_locality(device_dir: str) -> dict[str, Any]:
    """A PCI function's NUMA node (None when sysfs says -1: no firmware affinity, or NUMA off) and local CPUs."""
    node = _read(os.path.join(device_dir, "numa_node"))
    try:
        numa_node: Optional[int] = int(node) if node is not None else None
    except ValueError:
        numa_node = None
    return {"numa_node": numa_node if numa_node is not None and numa_node >= 0 else None,
            "numa_node_raw": node, "local_cpulist": _read(os.path.join(device_dir, "local_cpulist"))}


def rdma_devices(class_dir: str) -> dict[str, dict[str, Any]]:
    """RDMA devices under a sysfs ``class/infiniband`` directory -> their PCI address and locality.

    ``<dev>/device`` links to the PCI function (NCCL and Azure's health checks read it the same way); a
    device without that link (a software RDMA device such as rxe) is left out.
    """
    found: dict[str, dict[str, Any]] = {}
    if not os.path.isdir(class_dir):
        return found
    for name in sorted(os.listdir(class_dir)):
        device = os.path.join(class_dir, name, "device")
        if not os.path.exists(device):
            continue
        entry = read_locality(device)
        entry["address"] = os.path.basename(os.path.realpath(device))
        found[name] = entry
    return found
