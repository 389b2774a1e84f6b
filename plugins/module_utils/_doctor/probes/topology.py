# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The GPU / NIC / NUMA topology probe: ``nvidia-smi topo -m`` once (``rocm-smi --showtopo`` on AMD hosts), plus the
same facts from /sys (each GPU's and RDMA NIC's NUMA node and local CPUs, NUMA nodes, CPU sockets, this
process's CPUs). Reads, never judges: checks/topology.py judges. ``root`` lets tests lay out a /sys tree.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import gpus
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import find_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.topology import read_nvidia_topology, read_rocm_topology, read_sys_facts
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_FAILED

Options = Mapping[str, Any]
ROOT = "/"


def _tool_topology(options: Options) -> dict[str, Any]:
    """nvidia-smi's matrix, or rocm-smi's tables where nvidia-smi is absent; ProbeAbsent when neither tool is here."""
    envelope = (options.get("envelopes") or {}).get("nvidia_smi")
    if envelope is not None and envelope.get("status") == READ_FAILED:
        raise ProbeError("nvidia-smi failed (%s); topo -m not run" % envelope.get("reason"))
    try:
        nvidia_smi = find_nvidia_smi(options.get("nvidia_smi_path"))
    except ProbeAbsent:
        rocm_smi = gpus.find_rocm_tool("rocm-smi", override=options.get("rocm_smi_path"))
        if not rocm_smi:
            raise ProbeAbsent("neither nvidia-smi nor rocm-smi found (%s): no GPU topology to read" % gpus.ROCM_TOOL_PLACES) from None
        return read_rocm_topology(rocm_smi, options["timeouts"]["nvidia_smi"])
    return read_nvidia_topology(nvidia_smi, options["timeouts"]["nvidia_smi"])


def probe_topology(options: Options, root: Optional[str] = None) -> dict[str, Any]:
    """``nvidia-smi topo -m`` (or ``rocm-smi --showtopo``) parsed, and the /sys facts to cross-check it with."""
    topology = _tool_topology(options)
    return {"topology": topology, "sys": read_sys_facts(root or ROOT)}
