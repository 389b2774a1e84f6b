# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every probe by name, and the envelope each one's outcome is wrapped in.

A probe is ``fn(options) -> data`` (plain JSON-able data, no judgement). It
raises _command.ProbeAbsent when what it reads does not exist on the host and
_command.ProbeError when reading failed. collect() turns that into an
envelope: {"status": READ_OK|READ_ABSENT|READ_FAILED (_status.py), "data", "reason", "duration_ms"}.
Only the probes the selected checks need are run, each once.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import time
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import gpu as gpu_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import host as host_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import stack as stack_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system as system_probes
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_ABSENT, READ_FAILED, READ_OK

PROBES: dict[str, Callable[..., Any]] = {
    "host": host_probes.probe_host,
    "nvidia_smi": gpu_probes.probe_nvidia_smi,
    "nvml": gpu_probes.probe_nvml,
    "nvidia_pci": gpu_probes.probe_nvidia_pci,
    "kernel_module": gpu_probes.probe_kernel_module,
    "kernel_log": gpu_probes.probe_kernel_log,
    "nvlink": gpu_probes.probe_nvlink,
    "fabric_manager": gpu_probes.probe_fabric_manager,
    "torch": stack_probes.probe_torch,
    "nvcc": stack_probes.probe_nvcc,
    "dev_shm": system_probes.probe_dev_shm,
    "cgroups": system_probes.probe_cgroups,
    "edac": system_probes.probe_edac,
    "numa": system_probes.probe_numa,
    "disk_space": system_probes.probe_disk_space,
    "time_sync": system_probes.probe_time_sync,
    "infiniband": system_probes.probe_infiniband,
}


def collect(names: Iterable[str], options: Mapping[str, Any],
            probes: Optional[Mapping[str, Callable[..., Any]]] = None) -> dict[str, dict[str, Any]]:
    """Run each named probe once (in order) and return name -> envelope."""
    table = probes or PROBES
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in out:
            continue
        start = time.monotonic()
        try:
            envelope = {"status": READ_OK, "data": table[name](options), "reason": None}
        except ProbeAbsent as exc:
            envelope = {"status": READ_ABSENT, "data": None, "reason": str(exc)}
        except ProbeError as exc:
            envelope = {"status": READ_FAILED, "data": None, "reason": str(exc)}
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # An unexpected probe bug becomes ERROR on its checks, never a crash of the run.
            envelope = {"status": READ_FAILED, "data": None, "reason": "probe %s crashed: %s: %s" % (name, type(exc).__name__, exc)}
        envelope["duration_ms"] = round((time.monotonic() - start) * 1000.0, 3)
        out[name] = envelope
    return out
