# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU use per process: ``nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits``.

One line per process and GPU it holds memory on, e.g. ``41234, GPU-5d2e..., 1024``. ``used_memory`` is
``[N/A]`` (or ``[Insufficient Permissions]``) where the driver does not report it (containers, MIG without
accounting): such a process is still listed, with None. No process: empty output.

nvidia-smi writes such a bracketed token in any field of a CSV query it cannot read for the caller: an unprivileged
container on a MIG A100 got ``[Insufficient Permissions]`` for ``memory.*`` (Stability-AI/StableSwarmUI#388), and
``--query-compute-apps`` rows restricted by permissions are known to exporters that parse it
(utkuozdemir/nvidia_gpu_exporter#438). A line of the three fields whose pid is such a token is a process nvidia-smi
could not read, not "no process": it is a bad line (counted in ``bad``), so the idle guard never takes it for idle.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import csv_fields, first_line, to_number
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLine, BadLines, parse_lines

QUERY = "--query-compute-apps=pid,gpu_uuid,used_memory"


def _app_line(line: str) -> Optional[dict[str, Any]]:
    fields = csv_fields(line)
    if len(fields) != 3:
        return None
    pid, uuid, memory = fields
    if not isinstance(pid, str) or not pid.isdigit():
        raise BadLine("pid %r is not a process id" % line.split(",", 1)[0].strip()[:40])
    used = to_number(memory) if isinstance(memory, str) else None
    return {"pid": int(pid), "gpu_uuid": uuid if isinstance(uuid, str) else None,
            "used_memory_mib": used if isinstance(used, int) else None}


def parse_compute_apps(text: str, bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """CSV lines -> [{pid, gpu_uuid, used_memory_mib (int or None)}]; a line that is not one is skipped, one of
    the form that cannot be read (a 5,000-digit pid, a pid nvidia-smi could not read) counted in ``bad``.

    A process on several GPUs has one entry per GPU.
    """
    return [app for _number, _line, app in parse_lines(text, _app_line, BadLines() if bad is None else bad)]


def read_compute_apps(binary: str, timeout: float, bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """The compute processes nvidia-smi lists (lines that cannot be read counted in ``bad``); ProbeError when it
    fails or times out."""
    rc, out, err = command.run([binary, QUERY, "--format=csv,noheader,nounits"], timeout)
    if rc != 0:
        raise ProbeError("nvidia-smi %s exited with rc %s: %s" % (QUERY, rc, first_line(err, out)))
    return parse_compute_apps(out, bad)
