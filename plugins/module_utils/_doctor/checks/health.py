# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU memory health checks: ECC error counts, row remapping and retired pages, the driver's recovery action.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import amd as amd_checks
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.per_gpu import (
    GPU_PROBES,
    LOST_ADVICE,
    GpuResult,
    counted,
    describe_unreadable,
    gpu_detail,
    gpu_records,
    parse_mode,
    vendor_gate,
    verdict,
    with_counts,
    with_unreadable,
)
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import is_lost
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, WARN, severity

ECC_CORRECTABLE_WARN = _expect.key("ecc_correctable_warn")
ROW_REMAP_UNC_WARN = _expect.key("row_remap_uncorrectable_warn")
RETIRED_DBE_FAIL = _expect.key("retired_pages_dbe_fail")

# DCGM's limit on retired pages per GPU (dcgm_gpu_hardware_limits.h): beyond it the GPU is to be replaced.
RETIRED_PAGES_LIMIT = 60

RESET_OR_DRAIN = "Drain the node, reset the GPU (`nvidia-smi -r -i <index>` with no processes on it) or reboot"

# The record fields (dotted paths, or their prefixes) each check reads: its unreadable values among them
# make it ERROR (FAIL for a lost GPU).
_READS_ECC_ERRORS = ("ecc.volatile", "ecc.aggregate", "ecc.sram_threshold_exceeded")
_READS_ROW_REMAP = ("remapped_rows", "retired_pages", "repair")


@check("gpu.ecc_errors", "ECC errors", uses=GPU_PROBES)
def ecc_errors(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's volatile (since driver load) and aggregate (lifetime) ECC counters, DRAM and SRAM.

    FAIL when an uncorrectable error is counted since the driver loaded (volatile, DRAM or
    SRAM); WARN when only the lifetime (aggregate) count has uncorrectable errors (an old event
    the memory may have remapped: gpu.row_remap judges whether it did), when volatile
    correctable errors exceed `ecc_correctable_warn` (default 100) or when the SRAM error
    threshold is exceeded; PASS otherwise; SKIP when no GPU has ECC counters (ECC off or
    unsupported). Unreadable values among what it reads (an NVML error string such as Unknown
    Error, text where a number belongs, a number out of range) are an ERROR naming the GPU and
    field, a FAIL with a reset/reboot remediation when they say the GPU is lost or requires a
    reset; a GPU with nothing readable is not judged, and SKIP says "nothing readable" when no
    GPU is.

    AMD GPUs: the RAS counts since driver load (amd-smi metric ecc and ecc_blocks, sysfs
    ras/*_err_count), judged where ECC is enabled on some block; an uncorrectable or deferred
    (poison) count is a FAIL, also where the RAS block state reads "N/A" or DISABLED (the FAIL names
    that contradiction: a reported error is never SKIP). A GPU that amd-smi static lists and metric
    does not has its readings unreadable (ERROR), never "nothing readable". rocm-smi reports no
    counts: not judged.

    Remediation: drain the node, reset the GPU and re-check; replace the GPU when uncorrectable
    errors recur. A lifetime count alone: check gpu.row_remap, then clear the counters with
    `nvidia-smi -p 1` once the event is understood.
    """
    gate = vendor_gate(probes)
    if gate:
        return gate
    threshold = _expect.get(expect, ECC_CORRECTABLE_WARN)
    results = []
    counts: list[dict[str, Any]] = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        volatile, aggregate = gpu["ecc"]["volatile"], gpu["ecc"]["aggregate"]
        if volatile["correctable"] is None and volatile["uncorrectable"] is None and aggregate["uncorrectable"] is None:
            continue
        current = _uncorrectable(volatile, "volatile")
        lifetime = _uncorrectable(aggregate, "aggregate")
        correctable = volatile["correctable"] or 0
        detail = gpu_detail(gpu, volatile=volatile, aggregate=aggregate)
        counted(counts, gpu, volatile["correctable"])
        if current:
            results.append((FAIL, detail, "uncorrectable ECC errors since the driver loaded (%s)%s" % (
                _counts(current), amd_checks.ecc_state_contradiction(gpu))))
        elif lifetime:
            results.append((WARN, detail, "uncorrectable ECC errors in the lifetime count only (%s)" % _counts(lifetime)))
        elif correctable > threshold:
            results.append((WARN, detail, "%d correctable ECC errors since boot (over %d)" % (correctable, threshold)))
        elif gpu["ecc"]["sram_threshold_exceeded"]:
            results.append((WARN, detail, "SRAM correctable error threshold exceeded"))
        else:
            results.append((PASS, detail, "no uncorrectable errors"))
    found = verdict(with_unreadable(results, gpus, _READS_ECC_ERRORS), "no uncorrectable ECC errors on %d GPU(s)" % len(results),
                    {FAIL: RESET_OR_DRAIN + "; replace the GPU if uncorrectable errors recur.",
                     WARN: "Watch the GPU: check gpu.row_remap, reset it at the next maintenance window and replace it "
                     "if errors recur; clear a reviewed lifetime count with nvidia-smi -p 1."},
                    skip_message="no GPU reports ECC counters (ECC disabled or unsupported)")
    return with_counts(counts, found)


def _uncorrectable(counts: Mapping[str, Any], scope: str) -> dict[str, int]:
    """Non-zero uncorrectable counts of one scope, by memory kind (the total where no split is reported)."""
    found = OrderedDict(("%s %s" % (scope, kind), counts["%s_uncorrectable" % kind.lower()])
                        for kind in ("DRAM", "SRAM") if counts["%s_uncorrectable" % kind.lower()])
    if not found and counts["uncorrectable"]:
        found["%s total" % scope] = counts["uncorrectable"]
    if counts.get("deferred"):
        # AMD: uncorrectable data marked poisoned, its consumption deferred (memory poison).
        found["%s deferred" % scope] = counts["deferred"]
    return found


def _counts(found: Mapping[str, int]) -> str:
    return ", ".join("%s %d" % (k, v) for k, v in found.items())


@check("gpu.row_remap", "Row remapping / page retirement", uses=GPU_PROBES)
def row_remap(probes: Probes, expect: Expect) -> Finding:
    """Reads row remapping (Ampere and newer) or retired pages (older GPUs) of each GPU, and
    its repair state where the driver reports it (DTD v13: memory channel and TPC repair
    pending, unrepairable memory).

    Row remapping: FAIL on a remapping failure; WARN when a remap is pending (a GPU reset is
    needed to apply it), when rows remapped for uncorrectable errors reach
    `row_remap_uncorrectable_warn` (default 512), or when a memory bank has no spare row left.
    Retired pages: WARN when a retirement is pending; FAIL when pages retired for double-bit
    errors reach `retired_pages_dbe_fail` (default 15, DCGM's soft limit) or all retired pages
    reach 60 (DCGM's limit). Repair state: FAIL on unrepairable memory; WARN when a memory
    channel or TPC repair is pending (a GPU reset applies it). SKIP where none is reported
    (GeForce boards; MIG-enabled GPUs do not report remapping). Unreadable values among what
    it reads (an NVML error string such as Unknown Error, text where a number belongs, a
    number out of range) are an ERROR naming the GPU and field, a FAIL with a reset/reboot
    remediation when they say the GPU is lost or requires a reset; a GPU with nothing
    readable is not judged, and SKIP says "nothing readable" when no GPU is.

    AMD GPUs: the bad-page table (sysfs ras/gpu_vram_bad_pages): FAIL on an unreservable
    page or retired pages at the board's bad_page_threshold, WARN on pending pages or retired pages
    at 80 % of the threshold.

    Remediation: reset the GPU to apply pending remaps/retirements/repairs; replace a GPU with a
    remap failure, unrepairable memory or too many retired pages.
    """
    gate = vendor_gate(probes)
    if gate:
        return gate
    unc_warn, dbe_fail = _expect.get(expect, ROW_REMAP_UNC_WARN), _expect.get(expect, RETIRED_DBE_FAIL)
    results = []
    counts: list[dict[str, Any]] = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        remap, retired = gpu["remapped_rows"], gpu["retired_pages"]
        if gpu.get("vendor") == "amd":
            counted(counts, gpu, (gpu["bad_pages"] or {}).get("retired"))
            judged = amd_checks.bad_pages(gpu)
            if judged is not None:
                results.append(judged)
            continue
        if remap is not None and all(remap[key] is None for key in ("correctable", "uncorrectable", "pending", "failure")) \
                and all(value is None for value in remap["histogram"].values()):
            remap = None  # the structure is there but nothing in it is readable
        result: Optional[GpuResult] = None
        if remap is not None:
            detail = gpu_detail(gpu, remapped_rows=remap)
            counted(counts, gpu, (remap["correctable"] or 0) + (remap["uncorrectable"] or 0))
            exhausted = remap["histogram"].get("none") or 0
            if remap["failure"]:
                result = (FAIL, detail, "row remapping failed")
            elif remap["pending"]:
                result = (WARN, detail, "row remap pending: reset needed")
            elif (remap["uncorrectable"] or 0) >= unc_warn:
                result = (WARN, detail, "%d rows remapped for uncorrectable errors" % remap["uncorrectable"])
            elif exhausted:
                result = (WARN, detail, "%d memory bank(s) have no spare row left" % exhausted)
            else:
                result = (PASS, detail, "no pending or failed remap")
        elif retired["single_bit"] is not None or retired["double_bit"] is not None:
            detail = gpu_detail(gpu, retired_pages=retired)
            counted(counts, gpu, (retired["single_bit"] or 0) + (retired["double_bit"] or 0))
            dbe, total = retired["double_bit"] or 0, (retired["single_bit"] or 0) + (retired["double_bit"] or 0)
            if dbe >= dbe_fail or total >= RETIRED_PAGES_LIMIT:
                result = (FAIL, detail, "%d pages retired (%d for double-bit errors)" % (total, dbe))
            elif retired["pending"]:
                result = (WARN, detail, "page retirement pending: reset needed")
            else:
                result = (PASS, detail, "%d pages retired" % total)
        result = _with_repair(gpu, result)
        if result is not None:
            results.append(result)
    mig = any(parse_mode(g["mig"]["current"]) == "enabled" and g["remapped_rows"] is None for g in gpu_records(probes))
    found = verdict(with_unreadable(results, gpus, _READS_ROW_REMAP),
                    "no pending or failed row remap / page retirement on %d GPU(s)" % len(results),
                    {FAIL: "Drain the node and replace the GPU (remapping failed, memory it cannot repair, or retired "
                     "pages at the limit).",
                     WARN: RESET_OR_DRAIN + " to apply a pending remap, retirement or repair; replace the GPU when "
                     "spare rows run out or remaps keep growing."},
                    skip_message="no GPU reports row remapping or retired pages%s" % (
                        " (not reported while MIG is enabled)" if mig else ""))
    return with_counts(counts, found)


def _with_repair(gpu: Mapping[str, Any], judged: Optional[GpuResult]) -> Optional[GpuResult]:
    """The GPU's remap/retirement result with its repair state (DTD v13) judged beside it, the worse status winning:
    FAIL for memory errors no repair can fix, WARN for a memory channel or TPC repair waiting for a reset. A repair
    state of No alone judges nothing: it says no more about the rows than a GPU without remapping does."""
    repair = gpu.get("repair") or {}
    if all(value is None for value in repair.values()):
        return judged
    pending = [name for key, name in (("channel_pending", "memory channel"), ("tpc_pending", "TPC")) if repair.get(key)]
    if repair.get("unrepairable_memory"):
        status, phrase = FAIL, "memory errors that no repair can fix (unrepairable memory)"
    elif pending:
        status, phrase = WARN, "%s repair pending: reset needed" % " and ".join(pending)
    else:
        return None if judged is None else (judged[0], dict(judged[1], repair=repair), judged[2])
    if judged is None:
        return status, gpu_detail(gpu, repair=repair), phrase
    detail = dict(judged[1], repair=repair)
    if severity(status) > severity(judged[0]):
        return status, detail, phrase
    return judged[0], detail, "%s; also %s" % (judged[2], phrase)


# nvidia-smi's gpu_recovery_action (DTD v13, NVML nvmlGpuRecoveryAction_t) -> what to do.
_RECOVERY_ADVICE = OrderedDict((
    ("reset", "Drain the GPU's jobs, then reset it (`nvidia-smi -r -i <index>` with no processes on it) or reboot."),
    ("reboot", "Drain the node and reboot it: the driver says only a reboot recovers this GPU."),
    ("drain p2p", "Drain the node's peer-to-peer (NVLink/P2P) work: stop the jobs using this GPU's NVLinks, then "
                  "re-check; reset the GPU if the action stays."),
    ("drain and reset", "Drain the node, then reset the GPU (`nvidia-smi -r -i <index>` with no processes on it) or "
                        "reboot."),
))
_READS_RECOVERY_ACTION = ("recovery",)


@check("gpu.recovery_action", "Recovery action the driver asks for", requires=("nvidia_smi",))
def recovery_action(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's `gpu_recovery_action` (driver 570+: None, Reset, Reboot, Drain P2P, Drain and Reset),
    `gpu_reset_status` (reset required, drain and reset recommended: Yes/No) and every value nvidia-smi
    could not read.

    FAIL when the recovery action is anything but None, when a reset is required or a drain and reset
    recommended, or when any value of the GPU reads "GPU is lost" / "GPU requires reset": the remediation
    is the action the driver names. ERROR when the recovery fields themselves are unreadable. PASS when
    they read None / No; SKIP ("nothing readable") where the driver reports neither field (older drivers).

    Remediation: what the driver asks: reset the GPU (`nvidia-smi -r -i <index>`), reboot the node, drain
    P2P work, or drain and reset; a lost GPU needs a reset, reboot or power-cycle.
    """
    results: list[GpuResult] = []
    advice: list[str] = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        recovery = gpu["recovery"]
        action = (recovery["action"] or "").strip()
        lost = OrderedDict((path, raw) for path, raw in sorted((gpu.get("unreadable") or {}).items()) if is_lost(raw))
        detail = gpu_detail(gpu, recovery_action=recovery["action"], reset_required=recovery["reset_required"],
                            drain_and_reset_recommended=recovery["drain_and_reset_recommended"])
        if action and action.lower() != "none":
            advice.append(_RECOVERY_ADVICE.get(action.lower(), "Follow the driver's recovery action %r (NVIDIA's "
                                                               "nvidia-smi documentation), then re-check." % action))
            results.append((FAIL, detail, "the driver asks for recovery action %s" % action))
        elif recovery["drain_and_reset_recommended"]:
            advice.append(_RECOVERY_ADVICE["drain and reset"])
            results.append((FAIL, detail, "drain and reset recommended"))
        elif recovery["reset_required"]:
            advice.append(_RECOVERY_ADVICE["reset"])
            results.append((FAIL, detail, "GPU reset required"))
        elif lost:
            detail["unreadable"] = dict(lost)
            results.append((FAIL, detail, "GPU lost or needing a reset: %s" % describe_unreadable(lost)))
        elif action or recovery["reset_required"] is not None or recovery["drain_and_reset_recommended"] is not None:
            results.append((PASS, detail, "no recovery action"))
    status_advice = " ".join(OrderedDict.fromkeys(advice)) or None
    return verdict(with_unreadable(results, gpus, _READS_RECOVERY_ACTION), "no recovery action asked for on %d GPU(s)" % len(results),
                   {FAIL: status_advice or LOST_ADVICE},
                   skip_message="no GPU reports a recovery action or reset status (driver older than 535?)")
