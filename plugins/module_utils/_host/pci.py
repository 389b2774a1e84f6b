# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU PCI functions from sysfs (NVIDIA and AMD, counted once), one spelling for every PCI address, PCIe generations.

nvidia-smi writes ``00000000:3B:00.0``, sysfs ``0000:3b:00.0`` and the kernel
log ``PCI:0000:3b:00``; pci_key() turns each into ``0000:3b:00`` so they compare.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import collections
import os
import re
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError, call_with_timeout
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none

NVIDIA_VENDOR = "0x10de"
AMD_VENDOR = "0x1002"
# The GPU vendors by their PCI vendor id, as sysfs writes it.
VENDORS = {NVIDIA_VENDOR: "NVIDIA", AMD_VENDOR: "AMD"}

# PCIe transfer rate per lane (GT/s) -> generation: PCI-SIG's rates, 128 GT/s for PCIe 7.0 (released 2025).
PCIE_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}

_ADDRESS = re.compile(r"(?:PCI:)?(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-7])?$")


def pci_key(address: Optional[str]) -> Optional[str]:
    """``domain:bus:device`` in lower case with a 4-digit domain, or None when address is not one."""
    match = _ADDRESS.match((address or "").strip())
    if not match:
        return None
    domain, bus, device = match.groups()
    return "%04x:%02x:%02x" % (int(domain or "0", 16), int(bus, 16), int(device, 16))


def pcie_gen(gts: Optional[float]) -> Optional[int]:
    """The PCIe generation of a transfer rate in GT/s (16 -> 4, 128 -> 7); None when it is none of PCI-SIG's rates."""
    return None if gts is None else PCIE_GEN_BY_GTS.get(round(float(gts), 1))


def classify(pci_class: Optional[str], vendor_id: str = NVIDIA_VENDOR) -> Optional[str]:
    """Which list a GPU vendor's PCI function belongs in, from its class code ('0x030200'): gpus, nvswitches or None.

    The one rule for which PCI function is a GPU: NVIDIA and AMD display functions, AMD processing accelerators."""
    value = (pci_class or "").strip().lower()
    if value.startswith("0x03"):
        # 0x0300 VGA, 0x0302 3D controller (data-centre GPUs), 0x0380 other display.
        return "gpus"
    if vendor_id == AMD_VENDOR and value.startswith("0x12"):
        # A processing accelerator: MI300X is not a display device.
        return "gpus"
    if vendor_id == NVIDIA_VENDOR and value.startswith("0x0680"):
        # NVSwitch presents itself as a bridge of class "other".
        return "nvswitches"
    return None


def _read(path: str) -> Optional[str]:
    text = read_text_or_none(path)
    return text.strip() if text is not None else None


def scan_functions(devices_dir: str) -> list[dict[str, Any]]:
    """The GPU and NVSwitch functions of NVIDIA and AMD under a sysfs ``bus/pci/devices`` directory, sorted by address:
    [{address, vendor ("NVIDIA" or "AMD"), kind ("gpus" or "nvswitches"), device_id, class, driver}].

    The one reading of GPUs on the PCI bus; OSError when the directory cannot be listed.
    """
    found: list[dict[str, Any]] = []
    for address in sorted(os.listdir(devices_dir)):
        path = os.path.join(devices_dir, address)
        vendor = (_read(os.path.join(path, "vendor")) or "").lower()
        if vendor not in VENDORS:
            continue
        pci_class = _read(os.path.join(path, "class"))
        kind = classify(pci_class, vendor)
        if kind is None:
            continue  # the GPUs' HDMI audio and USB functions
        driver = os.path.join(path, "driver")
        found.append({
            "address": address, "vendor": VENDORS[vendor], "kind": kind,
            "device_id": _read(os.path.join(path, "device")),
            "class": pci_class,
            # Which kernel driver owns it: nvidia, amdgpu, vfio-pci (handed to a VM) or none.
            "driver": os.path.basename(os.readlink(driver)) if os.path.islink(driver) else None,
        })
    return found


def _of_vendor(functions: list[dict[str, Any]], vendor: str) -> list[dict[str, Any]]:
    """The functions of one vendor as {address, device_id, class, driver} (their vendor and kind dropped)."""
    return [{key: function[key] for key in ("address", "device_id", "class", "driver")}
            for function in functions if function["vendor"] == vendor]


def scan_nvidia_functions(devices_dir: str) -> dict[str, list[dict[str, Any]]]:
    """NVIDIA GPU and NVSwitch functions under a sysfs ``bus/pci/devices`` directory, sorted by address."""
    functions = scan_functions(devices_dir)
    return {kind: _of_vendor([f for f in functions if f["kind"] == kind], "NVIDIA") for kind in ("gpus", "nvswitches")}


def scan_amd_gpus(devices_dir: str) -> list[dict[str, Any]]:
    """AMD GPU functions under a sysfs ``bus/pci/devices`` directory: [{address, device_id, class, driver}], sorted;
    [] when the directory is not there."""
    return _of_vendor(scan_functions(devices_dir), "AMD") if os.path.isdir(devices_dir) else []


def count_gpus(devices_dir: str, timeout: float) -> tuple[Optional[int], Optional[str]]:
    """(GPU count, vendor) from the GPU functions on the PCI bus, the vendor with most when both have some; (0, None)
    when none or no such directory; (None, None) when it cannot be read within ``timeout`` seconds (unknown is not
    none)."""
    try:
        functions = call_with_timeout(lambda: scan_functions(devices_dir), timeout, "scan of %s" % devices_dir)
    except FileNotFoundError:
        return 0, None  # no PCI bus in sysfs (a container without it): no GPU to give a model
    except (OSError, ProbeError):
        return None, None
    counts = collections.Counter(function["vendor"] for function in functions if function["kind"] == "gpus")
    if not counts:
        return 0, None
    vendor, count = counts.most_common(1)[0]
    return count, vendor


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
