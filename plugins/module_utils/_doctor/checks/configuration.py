# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU configuration checks: persistence, ECC and MIG modes against hydra_expect.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import Counter
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.per_gpu import (
    expected_choice,
    gpu_detail,
    gpu_records,
    is_vgpu,
    parse_mode,
    verdict,
    with_unreadable,
)
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, WARN

ECC_MODE = _expect.key("ecc_mode")
MIG_MODE = _expect.key("mig_mode")
PERSISTENCE_MODE = _expect.key("persistence_mode")

# The record fields (dotted paths, or their prefixes) each check reads: its unreadable values among them
# make it ERROR (FAIL for a lost GPU).
_READS_PERSISTENCE_MODE = ("persistence_mode",)
_READS_ECC_MODE = ("ecc.current", "ecc.pending")
_READS_MIG = ("mig.current", "mig.pending")
_READS_VGPU_LICENSE = ("vgpu_license",)


@check("gpu.persistence_mode", "Persistence mode", requires=("nvidia_smi",))
def persistence_mode(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's persistence mode.

    WARN for GPUs with persistence mode Disabled: the driver tears the GPU state down whenever
    the last process exits, so every job start pays seconds of re-initialisation and settings
    such as application clocks are lost. PASS when enabled, or when `persistence_mode: disabled`
    says off is intended; SKIP where the driver does not report it. Unreadable values among what
    it reads (an NVML error string such as Unknown Error, text where a number belongs, a number
    out of range) are an ERROR naming the GPU and field, a FAIL with a reset/reboot remediation
    when they say the GPU is lost or requires a reset; a GPU with nothing readable is not
    judged, and SKIP says "nothing readable" when no GPU is.

    Remediation: run the nvidia-persistenced service (`systemctl enable --now nvidia-persistenced`)
    or `nvidia-smi -pm 1`.
    """
    wanted, bad = expected_choice(expect, PERSISTENCE_MODE)
    if bad:
        return bad
    results = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        mode = parse_mode(gpu["persistence_mode"])
        if mode is None:
            continue
        off = mode == "disabled" and wanted != "disabled"
        results.append((WARN if off else PASS, gpu_detail(gpu, persistence_mode=mode), "persistence mode is off"))
    accepted = " (disabled accepted by expect.persistence_mode)" if wanted == "disabled" else ""
    return verdict(with_unreadable(results, gpus, _READS_PERSISTENCE_MODE), "persistence mode as intended on %d GPU(s)%s" % (len(results), accepted),
                   "Enable it at boot: `systemctl enable --now nvidia-persistenced` (or `nvidia-smi -pm 1`, or the "
                   "continuum.hydra.gpu_settings role with gpu_settings_persistence_mode).",
                   skip_message="no GPU reports a persistence mode")


def _mode_results(gpus: list[dict[str, Any]], section: str, label: str, wanted: Optional[str],
                  pending_needs: str) -> list[tuple[str, dict[str, Any], str]]:
    """Per GPU (current, pending) of an ECC- or MIG-like mode against the expected one; GPUs without it are left out."""
    results = []
    for gpu in gpus:
        current, pending = parse_mode(gpu[section]["current"]), parse_mode(gpu[section]["pending"])
        values: dict[str, Any] = {"current": current, "pending": pending}
        if section == "mig":
            values["instances"] = gpu[section]["instances"]
        values["expected"] = wanted
        detail = gpu_detail(gpu, **values)
        if current is None:
            if wanted == "enabled":
                results.append((FAIL, detail, "no %s support where %s enabled is expected" % (label, label)))
            continue
        if wanted and current != wanted:
            results.append((WARN if pending == wanted else FAIL, detail,
                            "%s %s, expected %s%s" % (label, current, wanted, " (pending: reset needed)" if pending == wanted else "")))
        elif pending and pending != current:
            results.append((WARN, detail, "%s %s, pending %s: %s" % (label, current, pending, pending_needs)))
        else:
            results.append((PASS, detail, "%s %s" % (label, current)))
    return results


@check("gpu.ecc_mode", "ECC mode", requires=("nvidia_smi",))
def ecc_mode(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's current and pending ECC mode, against `ecc_mode`.

    WARN when pending differs from current (a GPU reset or reboot is needed to apply it); FAIL
    when the current mode differs from the expected one (or the GPU has no ECC where enabled is
    expected), unless the pending mode fixes it (then WARN). PASS otherwise (informational
    without an expectation); SKIP when no GPU supports ECC. Unreadable values among what it
    reads (an NVML error string such as Unknown Error, text where a number belongs, a number out
    of range) are an ERROR naming the GPU and field, a FAIL with a reset/reboot remediation when
    they say the GPU is lost or requires a reset; a GPU with nothing readable is not judged, and
    SKIP says "nothing readable" when no GPU is.

    Remediation: `nvidia-smi -e 1 -i <index>` (or `-e 0`), then reset the GPU or reboot.
    """
    wanted, bad = expected_choice(expect, ECC_MODE)
    if bad:
        return bad
    gpus = gpu_records(probes)
    results = _mode_results(gpus, "ecc", "ECC", wanted, "reboot/reset needed")
    modes = Counter(result[1]["current"] for result in results if result[1]["current"])
    summary = ", ".join("%s on %d" % (mode, count) for mode, count in sorted(modes.items()))
    target = "ECC %s" % wanted if wanted else "ECC mode set"
    return verdict(with_unreadable(results, gpus, _READS_ECC_MODE), "ECC %s GPU(s)%s" % (summary, "" if wanted else " (no ecc_mode expected)"),
                   {FAIL: "Set %s with `nvidia-smi -e %d -i <index>`, then reset the GPU or reboot." % (
                       target, 1 if wanted == "enabled" else 0),
                    WARN: "Reset the GPU (`nvidia-smi -r -i <index>`) or reboot to apply the pending ECC mode."},
                   skip_message="no GPU supports ECC")


@check("gpu.mig", "MIG mode", requires=("nvidia_smi",))
def mig_mode(probes: Probes, expect: Expect) -> Finding:
    """Reads each MIG-capable GPU's current and pending MIG mode and its MIG instances, against `mig_mode`.

    WARN when pending differs from current (a GPU reset is needed); FAIL when the current mode
    differs from the expected one (WARN when the pending mode fixes it) or when MIG is expected
    on a GPU without MIG. PASS otherwise (informational without an expectation); SKIP when no
    GPU supports MIG. Unreadable values among what it reads (an NVML error string such as
    Unknown Error, text where a number belongs, a number out of range) are an ERROR naming the
    GPU and field, a FAIL with a reset/reboot remediation when they say the GPU is lost or
    requires a reset; a GPU with nothing readable is not judged, and SKIP says "nothing
    readable" when no GPU is.

    Remediation: `nvidia-smi -mig 1 -i <index>` (or `-mig 0`), then reset the GPU.
    """
    wanted, bad = expected_choice(expect, MIG_MODE)
    if bad:
        return bad
    gpus = gpu_records(probes)
    results = _mode_results(gpus, "mig", "MIG", wanted, "reset needed")
    enabled = [result[1] for result in results if result[1]["current"] == "enabled"]
    return verdict(with_unreadable(results, gpus, _READS_MIG), "MIG enabled on %d of %d capable GPU(s) (%d instances)%s" % (
        len(enabled), len(results), sum(d["instances"] for d in enabled), "" if wanted else "; no mig_mode expected"),
        {FAIL: "Set the MIG mode with `nvidia-smi -mig %d -i <index>`, then reset the GPU." % (1 if wanted == "enabled" else 0),
         WARN: "Reset the GPU (`nvidia-smi -r -i <index>`) to apply the pending MIG mode."},
        skip_message="no GPU supports MIG")


@check("gpu.vgpu_license", "vGPU software license", requires=("nvidia_smi",))
def vgpu_license(probes: Probes, expect: Expect) -> Finding:
    """Reads the NVIDIA vGPU software license state of each GPU that reports one (vGPU guests, GPUs
    under the GRID driver).

    FAIL when a GPU is unlicensed with its performance and features restricted (Unlicensed
    (Restricted), or a vGPU guest's Unlicensed): NVIDIA degrades an unlicensed vGPU
    progressively, so its jobs run slow or not at all. WARN when it runs unlicensed on its grace
    period (Unlicensed (Unrestricted)) or in any other state than licensed (a pass-through or
    bare-metal GPU's Unlicensed: its licensed features are off). PASS when
    licensed; SKIP when no GPU reports a license (bare metal and pass-through GPUs under the
    standard driver). Unreadable values among what it reads (an NVML error string such as
    Unknown Error) are an ERROR naming the GPU and field, a FAIL with a reset/reboot remediation
    when they say the GPU is lost.

    Remediation: license the guest (the client configuration token of the NVIDIA License System
    in /etc/nvidia/ClientConfigToken, then `systemctl restart nvidia-gridd`; its log names a
    failed license request).
    """
    results = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        state = gpu.get("vgpu_license")
        if not isinstance(state, str):
            continue
        lowered = state.lower()
        detail = gpu_detail(gpu, vgpu_license=state)
        if lowered.startswith("licensed"):
            results.append((PASS, detail, "licensed"))
        elif lowered == "unlicensed (restricted)" or (lowered == "unlicensed" and is_vgpu(gpu)):
            results.append((FAIL, detail, "unlicensed: performance and features restricted (%s)" % state))
        else:
            results.append((WARN, detail, "not licensed (%s)%s" % (
                state, ": full speed only until its grace period ends" if "unrestricted" in lowered else "")))
    return verdict(with_unreadable(results, gpus, _READS_VGPU_LICENSE), "vGPU software licensed on %d GPU(s)" % len(results),
                   "License the guest: put the NVIDIA License System's client configuration token in "
                   "/etc/nvidia/ClientConfigToken and `systemctl restart nvidia-gridd` (its log names a failed request).",
                   skip_message="no GPU reports a vGPU software license")
