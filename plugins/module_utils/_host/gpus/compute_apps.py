# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU use per process: ``nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits``.

One line per process and GPU it holds memory on, e.g. ``41234, GPU-5d2e..., 1024``. ``used_memory`` is
``[N/A]`` (or ``[Insufficient Permissions]``) where the driver does not report it (containers, MIG without
accounting): such a process is still listed, with None. No process: empty output.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import first_line

QUERY = "--query-compute-apps=pid,gpu_uuid,used_memory"


def parse_compute_apps(text: str) -> list[dict[str, Any]]:
    """CSV lines -> [{pid, gpu_uuid, used_memory_mib (int or None)}]; a line that is not one is skipped.

    A process on several GPUs has one entry per GPU.
    """
    out = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        memory = parts[2].split()[0] if parts[2] else ""
        out.append({"pid": int(parts[0]), "gpu_uuid": parts[1] or None,
                    "used_memory_mib": int(memory) if memory.isdigit() else None})
    return out


def read_compute_apps(binary: str, timeout: float) -> list[dict[str, Any]]:
    """The compute processes nvidia-smi lists; ProbeError when it fails or times out."""
    rc, out, err = command.run([binary, QUERY, "--format=csv,noheader,nounits"], timeout)
    if rc != 0:
        raise ProbeError("nvidia-smi %s exited with rc %s: %s" % (QUERY, rc, first_line(err, out)))
    return parse_compute_apps(out)
