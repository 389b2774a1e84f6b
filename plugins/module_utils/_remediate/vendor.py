# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""NVIDIA-only remediation on an AMD host: skip with the reason, never fail on a missing nvidia-smi.

gpu_settings (persistence mode, power limit, application / locked clocks, compute mode, ECC mode) and mig change
GPUs through nvidia-smi. On a host with no nvidia-smi whose GPUs are AMD (amd-smi or rocm-smi on PATH, an AMD GPU
on the PCI bus, or the amdgpu module loaded) the module exits ``skipped`` with ``skip_reason`` and changes nothing;
gpu_settings applies the one one-to-one AMD equivalent, the power cap (amd-smi), and skips the rest with the reason.
A host with neither vendor still fails (nvidia-smi not found): a GPU role aimed at a host without GPUs is a mistake.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command, gpus

# What each NVIDIA-only worker says on an AMD host: why it does not apply, and the nearest AMD tool.
NVIDIA_ONLY = {
    "gpu_settings": ("persistence mode, application and locked clocks, compute mode and ECC mode are set through "
                     "nvidia-smi and are NVIDIA-only; the one AMD equivalent, the power cap, is applied with "
                     "`amd-smi set --gpu <index> --power-cap <watts>` when power_limit is set (docs/amd.md)"),
    "mig": ("MIG is NVIDIA-only; AMD Instinct GPUs partition with `amd-smi set --gpu <index> --compute-partition "
            "<SPX|DPX|QPX|CPX>` (a different model: logical devices, not GPU instances), which this role does not manage "
            "(docs/amd.md)"),
}


def amd_host(nvidia_smi_path: Optional[str], root: str = "/") -> Optional[str]:
    """What shows the GPUs are AMD when nvidia-smi is absent (a short phrase), None for an NVIDIA (or GPU-less) host.

    An explicit ``nvidia_smi_path`` is never second-guessed: a wrong path fails as before."""
    if nvidia_smi_path or command.find_binary("nvidia-smi"):
        return None
    return gpus.amd_evidence(root)


def skip_reason(worker: str, evidence: str) -> str:
    return "no nvidia-smi on this host and its GPUs are AMD (%s): %s" % (evidence, NVIDIA_ONLY[worker])


def skip_on_amd(module: Any, worker: str, nvidia_smi_path: Optional[str], root: str = "/") -> None:
    """Exit the module skipped (changed false, skip_reason) when nvidia-smi is absent and the GPUs are AMD."""
    evidence = amd_host(nvidia_smi_path, root)
    if evidence is None:
        return
    reason = skip_reason(worker, evidence)
    module.exit_json(changed=False, skipped=True, skip_reason=reason, msg="skipped: " + reason)
