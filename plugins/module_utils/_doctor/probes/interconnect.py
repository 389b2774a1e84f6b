# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Interconnect error counters: InfiniBand/RoCE ports, NVLink links, PCIe AER of the GPUs and NICs.

Each probe reads raw counters with the time of the reading (``read_at``, Unix time) and judges nothing: the
rates are computed on the controller from two runs (plugin_utils/_fleet/interconnect.py, docs/interconnect.md).
Reading and parsing live in _host (ib_counters.py, pcie_aer.py, gpus/nvlink_errors.py); every read has a
deadline (``timeouts.command`` for the sysfs readings, ``timeouts.nvidia_smi`` for NVML and nvidia-smi).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import time
from collections.abc import Mapping
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvml
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import find_nvidia_smi, first_line
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvlink_errors import nvml_nvlink_errors, parse_nvlink_errors
from ansible_collections.continuum.hydra.plugins.module_utils._host.ib_counters import read_port_counters
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines, describe
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import rdma_devices, scan_functions
from ansible_collections.continuum.hydra.plugins.module_utils._host.pcie_aer import read_aer
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_FAILED

Options = Mapping[str, Any]


def probe_ib_counters(options: Options, root: str = "/") -> dict[str, Any]:
    """State, rate and error counters of every port under /sys/class/infiniband (_host/ib_counters.py)."""
    return read_port_counters(root, options["timeouts"]["command"])


def pcie_functions(root: str) -> list[dict[str, Any]]:
    """The PCI functions whose AER counters matter: GPUs (NVIDIA, AMD), NVSwitches and the RDMA NICs."""
    devices_dir = os.path.join(root, "sys/bus/pci/devices")
    found: dict[str, dict[str, Any]] = {}
    if os.path.isdir(devices_dir):
        for function in scan_functions(devices_dir):
            kind = "gpu" if function["kind"] == "gpus" else "nvswitch"
            found[function["address"]] = {"address": function["address"], "kind": kind, "name": None}
    for name, device in rdma_devices(os.path.join(root, "sys/class/infiniband")).items():
        entry = found.setdefault(device["address"], {"address": device["address"], "kind": "nic", "name": None})
        entry["name"] = ",".join(n for n in (entry["name"], name) if n)  # a dual-port NIC: one function, two devices
    return [found[address] for address in sorted(found)]


def probe_pcie_aer(options: Options, root: str = "/") -> dict[str, Any]:
    """The PCIe AER counters (correctable, non-fatal, fatal) of the GPUs, NVSwitches and RDMA NICs."""
    functions = pcie_functions(root)
    if not functions:
        raise ProbeAbsent("no GPU, NVSwitch or RDMA NIC on the PCI bus")
    try:
        data = read_aer(os.path.join(root, "sys/bus/pci/devices"), functions, options["timeouts"]["command"])
    except OSError as exc:
        raise ProbeError("cannot read the AER counters: %s" % exc) from None
    if not data["devices"]:
        raise ProbeAbsent("no AER statistics on %d PCI function(s) (kernel before 4.19, or AER not enabled)" % len(functions))
    return data


def probe_nvlink_errors(options: Options) -> dict[str, Any]:
    """NVLink error counters per GPU and link: NVML when it initialises, else ``nvidia-smi nvlink -e``.

    Not read when ``nvidia-smi -q -x`` already failed in this run (a hung driver costs one timeout, not two).
    """
    earlier = (options.get("envelopes") or {}).get("nvidia_smi")
    if earlier is not None and earlier["status"] == READ_FAILED:
        raise ProbeError("not read: nvidia-smi failed earlier in this run (%s)" % earlier["reason"])
    bad = BadLines()
    gpus, source = None, None
    read_at = time.time()
    try:
        available, value = nvml.session(nvml_nvlink_errors, options["timeouts"]["nvidia_smi"])
        if available:
            gpus, source = value, "nvml"
    except ProbeAbsent:
        pass
    if gpus is None:
        binary = find_nvidia_smi(options.get("nvidia_smi_path"))
        read_at = time.time()
        rc, out, err = command.run([binary, "nvlink", "-e"], options["timeouts"]["nvidia_smi"])
        if rc != 0:
            raise ProbeError("nvidia-smi nvlink -e exited with rc %s: %s" % (rc, first_line(err, out)))
        gpus, source = parse_nvlink_errors(out, bad), "nvidia-smi"
    if not any(gpu["links"] or gpu["unreadable"] for gpu in gpus):
        if bad:
            raise ProbeError("nvidia-smi nvlink -e: no counter read, %s" % describe(bad.as_dict()))
        raise ProbeAbsent("no GPU on this host reports NVLink error counters")
    return {"source": source, "read_at": read_at, "gpus": gpus, "bad_lines": bad.as_dict()}
