# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The idle guard of doctor's deep level: what occupies the node, read before any active probe loads it.

``node_idle`` reads the node's GPU compute processes and SLURM jobs (_host/idle.py) right before the active probes.
collect() (catalogue.py) runs no active probe while it finds something (``force`` aside), nor when it could not
confirm the node idle: this probe then fails with what could not be read.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import idle
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import find_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_FAILED


def probe_node_idle(options: Mapping[str, Any]) -> dict[str, Any]:
    """{gpu_processes, slurm, unconfirmed, node, force}; ProbeError naming what could not be read (the node is then
    not confirmed idle), unless ``force`` is set (the active probes run anyway, and the check says what was unread)."""
    earlier = (options.get("envelopes") or {}).get("nvidia_smi")
    unconfirmed: list[str] = []
    binary: Optional[str] = None
    if earlier is not None and earlier["status"] == READ_FAILED:
        unconfirmed.append("GPU compute processes not listed: nvidia-smi failed earlier in this run (%s)" % earlier["reason"])
    else:
        try:
            binary = find_nvidia_smi(options.get("nvidia_smi_path"))
        except ProbeAbsent:
            binary = None  # no NVIDIA driver: no NVIDIA compute process
    node = idle.node_name(options.get("slurm_node"))
    reading = idle.read_idle(binary, options["timeouts"]["nvidia_smi"], node)
    unconfirmed += reading["unconfirmed"]
    if unconfirmed and not options.get("force"):
        raise ProbeError("cannot confirm the node is idle: %s" % "; ".join(unconfirmed))
    return dict(reading, unconfirmed=unconfirmed, node=node, force=bool(options.get("force")))
