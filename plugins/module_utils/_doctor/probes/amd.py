# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""AMD GPU probes: the GPU inventory (amd-smi, else rocm-smi, else sysfs) and the amdgpu lines of the kernel log.

Each probe reads, never judges; reading and parsing live in _host/gpus (amd_smi.py, rocm_smi.py, amd_sysfs.py) and
amdgpu_log.py. Probes that read /sys take a ``root`` keyword so tests can lay out a tree under a temporary directory.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import os
import time
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import gpu as gpu_probes
from ansible_collections.continuum.hydra.plugins.module_utils._host import gpus
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key

Options = Mapping[str, Any]

ROOT = "/"


def amd_present(base: str) -> bool:
    """Anything AMD to read here: an AMD GPU on the PCI bus, the amdgpu module loaded, or amd-smi / rocm-smi on PATH.

    Checked before the AMD readers are imported: on every other host they are never loaded (a module's code is
    compiled on the host each run, and most hosts of most fleets have no AMD GPU)."""
    return gpus.amd_evidence(base) is not None


def _replays(devices: Mapping[str, str]) -> dict[str, Any]:
    """pci key -> the sysfs pcie_replay_count of each amdgpu device now (None where unreadable)."""
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi, amd_sysfs

    out = {}
    for key, device in devices.items():
        value = amd_smi.number(amd_sysfs.read_value(device + "/pcie_replay_count"))
        out[key] = value if isinstance(value, int) else None
    return out


def device_key(key: Optional[str]) -> str:
    return key or ""


def probe_amd_smi(options: Options, root: Optional[str] = None) -> dict[str, Any]:
    """The AMD GPU inventory: ``amd-smi list/static/metric --json`` (one call each), else ``rocm-smi --showallinfo
    --json``, else sysfs; plus the AMD GPUs on the PCI bus, the amdgpu module and the KFD topology.

    Each GPU record also gets, from sysfs where its device is there: bad pages, RAS counts per block, and
    ``pcie.replay_growth`` (replays counted while the tools ran: a link retransmitting now). ProbeAbsent on a host
    with no AMD tool and no AMD GPU; ProbeError when a tool fails or writes what cannot be read.
    """
    base = root or ROOT
    if not amd_present(base):
        raise ProbeAbsent("no AMD GPU: amd-smi and rocm-smi not found and no AMD GPU on the PCI bus")
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi, amd_sysfs, rocm_smi

    timeout = options["timeouts"]["nvidia_smi"]
    pci = amd_sysfs.scan_pci(base)
    devices = amd_sysfs.device_dirs(base)
    before, started = _replays(devices), time.monotonic()
    amd, rocm = gpus.find_rocm_tool("amd-smi"), gpus.find_rocm_tool("rocm-smi")
    inventory: Optional[dict[str, Any]] = None
    try:
        if amd:
            inventory = amd_smi.read_gpus(amd, timeout)
        elif rocm:
            inventory = rocm_smi.read_gpus(rocm, timeout)
    except ProbeError as exc:
        # ROCm's tools installed on a host without an AMD GPU (an NVIDIA node, a container image built for both)
        # exit non-zero: nothing to judge when the PCI bus, readable here, holds no AMD GPU. A hang or unreadable
        # output stays an error.
        if "exited with rc" in str(exc) and not pci and not devices and os.path.isdir(os.path.join(base, "sys/bus/pci/devices")):
            raise ProbeAbsent("no AMD GPU on the PCI bus (%s)" % exc) from None
        raise
    if inventory is not None:
        pass
    elif devices:
        inventory = amd_sysfs.read_gpus(base)
    elif pci:
        inventory = {"vendor": amd_smi.VENDOR, "source": None, "driver_version": None, "driver_kind": None,
                     "kernel_release": None, "gpus": [], "unreadable": {},
                     "problems": ["AMD GPU(s) on the PCI bus, but amd-smi and rocm-smi are not on PATH and no amdgpu "
                                  "device is in /sys/class/drm"]}
    else:
        raise ProbeAbsent("no AMD GPU: amd-smi and rocm-smi not on PATH and no AMD GPU on the PCI bus")
    after, seconds = _replays(devices), round(time.monotonic() - started, 3)
    for record in inventory["gpus"]:
        key = pci_key(record["pci_bus_id"])
        device = devices.get(key) if key else None
        if device is None:
            record["pcie"]["replay_growth"] = None
            continue
        if inventory["source"] != "sysfs":
            amd_sysfs.apply_extras(record, amd_sysfs.read_device_extras(device))
            amd_smi.finish(record)
        first, last = before.get(device_key(key)), after.get(device_key(key))
        record["pcie"]["replay_growth"] = last - first if first is not None and last is not None else None
    module = amd_sysfs.read_module(base)
    if inventory["driver_version"] is None and module["version"]:
        inventory["driver_version"], inventory["driver_kind"] = module["version"], "dkms"
    inventory.update(pci_gpus=pci, kernel_module=module, kfd=amd_sysfs.read_kfd(base), replay_window_s=seconds)
    return inventory


def probe_amdgpu_log(options: Options, now: Optional[datetime.datetime] = None, root: Optional[str] = None) -> dict[str, Any]:
    """The amdgpu lines of the kernel log within the XID window, graded by amdgpu_log.scan (journalctl, else dmesg,
    as the NVIDIA kernel_log probe reads it: gpu_probes.read_kernel_log). Absent where nothing is AMD."""
    if not amd_present(root or ROOT):
        raise ProbeAbsent("no AMD GPU: no amdgpu kernel log to grade")
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import amdgpu_log

    text, cutoff, facts = gpu_probes.read_kernel_log(options, now)
    return dict(amdgpu_log.scan(text, cutoff), **facts)
