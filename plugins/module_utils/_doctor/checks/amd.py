# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""AMD-only GPU checks: pure functions of the amd_smi and amdgpu_log probes.

The checks AMD and NVIDIA GPUs share (gpu.count, gpu.model, gpu.temperature, ...) live in driver.py, health.py and
performance.py and read either vendor's records; these are the ones without an NVIDIA counterpart: whether amd-smi works (the amd_smi probe's
root check), XGMI errors, partition modes, and the amdgpu kernel-log grading (beside gpu.xid_errors).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import OrderedDict
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import events
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.per_gpu import verdict, with_unreadable
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import PARTITION_DEVICES
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import XGMI_FAULTS
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_name, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_ABSENT, READ_FAILED, READ_OK, SKIP, WARN, worst

COMPUTE_PARTITION = _expect.key("amd_compute_partition")
MEMORY_PARTITION = _expect.key("amd_memory_partition")

# amdgpu kernel-log event kind (probes/amdgpu_log.py) -> (status, what it means, what to do).
AMDGPU_EVENTS = OrderedDict((
    ("ras_uncorrectable", (FAIL, "uncorrectable RAS error", "drain the node and reset the GPU (`amd-smi reset -G -g "
                                                            "<index>`) or reboot; replace the GPU if it recurs")),
    ("bad_page_threshold", (FAIL, "bad-page table at its threshold (GPU to be replaced)",
                            "drain the node and have the GPU replaced (RMA); amd-smi bad-pages lists the pages")),
    ("init_failed", (FAIL, "GPU failed to initialise", "read the full amdgpu boot log; reseat or replace the GPU")),
    ("reset_failed", (FAIL, "GPU reset failed", "power-cycle the node (a failed reset leaves the GPU wedged)")),
    ("reset_unfinished", (WARN, "GPU reset begun with no outcome logged",
                          "check that the GPU answers amd-smi; reboot if it does not")),
    ("ras_correctable", (WARN, "correctable RAS errors", "watch the GPU's ECC counts (gpu.ecc_errors)")),
    ("reset_succeeded", (WARN, "GPU reset (recovered)", "find the job that hung the GPU; jobs on it were killed")),
    ("ring_timeout", (WARN, "GPU hang (ring timeout)", "find the job that hung the GPU; check gpu.amdgpu_errors "
                                                       "for the reset that followed")),
    ("vram_lost", (WARN, "VRAM lost in a reset", "jobs on the GPU lost their memory: restart them")),
    ("page_fault", (PASS, "application page fault (not a hardware fault)", None)),
))


def _amd(probes: Probes) -> dict[str, Any]:
    return probes["amd_smi"]["data"] or {}


# ---------------------------------------------------------------- AMD branches of the shared checks (driver.py, health.py, performance.py)

# Share of the bad-page threshold from which retired pages WARN (plan the RMA before the GPU stops initialising).
BAD_PAGE_WARN_SHARE = 0.8


def bad_pages(gpu: dict[str, Any]) -> Optional[tuple[str, dict[str, Any], str]]:
    """gpu.row_remap for an AMD GPU: its bad-page table (retired R / pending P / unreservable F pages) against the
    board's bad_page_threshold. None when nothing is read (no sysfs ras/gpu_vram_bad_pages, N/A)."""
    pages = gpu.get("bad_pages") or {}
    retired, pending, failed, threshold = (pages.get(k) for k in ("retired", "pending", "unreservable", "threshold"))
    if retired is None and pending is None and failed is None:
        return None
    detail = dict(gpu_ref(gpu), bad_pages=dict(pages))
    if failed:
        return FAIL, detail, "%d bad page(s) could not be reserved (unreservable)" % failed
    if threshold and threshold > 0 and (retired or 0) >= threshold:
        return FAIL, detail, "%d retired pages reach the bad-page threshold %d" % (retired or 0, threshold)
    if pending:
        return WARN, detail, "%d bad page(s) pending retirement: reset or reboot to retire them" % pending
    if threshold and threshold > 0 and (retired or 0) >= BAD_PAGE_WARN_SHARE * threshold:
        return WARN, detail, "%d retired pages, near the threshold %d: plan the replacement" % (retired or 0, threshold)
    return PASS, detail, "%d pages retired" % (retired or 0)


def ecc_state_contradiction(gpu: dict[str, Any]) -> str:
    """gpu.ecc_errors for an AMD GPU: ' although ...' when its uncorrectable count comes with a RAS state that is not
    ENABLED ("N/A", DISABLED, or no amd-smi static): the count is judged all the same, the contradiction named."""
    if gpu.get("vendor") != "amd" or (gpu.get("ecc") or {}).get("current") == "Enabled":
        return ""
    state = (gpu.get("ecc") or {}).get("current")
    return " although amd-smi static reads the RAS block state as %s" % (
        "DISABLED" if state == "Disabled" else "N/A (state unknown)")


def replay_growth(gpu: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    """gpu.pcie_replay for an AMD GPU: replays counted while doctor read it (sysfs before and after the tools).

    Absolute counts are not a verdict on AMD (healthy idle MI250 dies show 147 and 3824 since driver load)."""
    pcie = gpu["pcie"]
    grew = pcie.get("replay_growth")
    detail = dict(gpu_ref(gpu), replays=pcie["replay_counter"], replay_growth=grew)
    if grew:
        return WARN, detail, "%d PCIe replays while doctor ran (%d since driver load): the link retransmits" % (
            grew, pcie["replay_counter"])
    if pcie.get("replay_rollover_counter"):
        return WARN, detail, "PCIe replay counter rolled over %d time(s)" % pcie["replay_rollover_counter"]
    if grew is None:
        return PASS, detail, "%d PCIe replays since driver load (growth not measured: no sysfs device)" % pcie["replay_counter"]
    return PASS, detail, "%d PCIe replays since driver load, none while doctor ran" % pcie["replay_counter"]


def count(probes: Probes, want: Optional[int]) -> Finding:
    """gpu.count on a host whose GPUs are AMD: the logical GPUs amd-smi lists against `gpu_count`, with the AMD
    GPUs on the PCI bus (a device there but absent from the tool is a FAIL) and the KFD nodes ROCm can use."""
    amd = probes["amd_smi"]
    if amd["status"] == READ_FAILED:
        return finding(ERROR, "cannot count GPUs: amd-smi failed: %s" % amd["reason"], remediation="See driver.amd_smi.")
    data = _amd(probes)
    gpus = data["gpus"]
    host = probes["host"]["data"] if probes["host"]["status"] == READ_OK else {}
    seen = set(pci_key(g["pci_bus_id"]) for g in gpus if g["pci_bus_id"])
    on_bus = data.get("pci_gpus") or []
    lost = [g["address"] for g in on_bus if pci_key(g["address"]) not in seen and g.get("driver") != "vfio-pci"]
    if not seen and len(gpus) >= len(on_bus):
        lost = []  # the tool gave no addresses: compare counts only
    physical = len(seen) or len(gpus)
    modes: list[str] = sorted(set(str(mode) for g in gpus for mode in [(g.get("partition") or {}).get("compute")] if mode))
    kfd = data.get("kfd")
    details = {"expected": want, "seen": len(gpus), "physical": physical, "compute_partitions": modes,
               "kfd_gpu_nodes": kfd["gpu_nodes"] if kfd else None, "gpus": [gpu_ref(g) for g in gpus],
               "pci_not_seen_by_driver": lost, "source": data.get("source")}
    if lost and not (host or {}).get("is_container"):
        return finding(FAIL, "%d AMD GPU(s) listed by %s, but %d more on the PCI bus are not: %s" % (
            len(gpus), data.get("source") or "no tool", len(lost), ", ".join(lost)), details,
            remediation="Look for the missing GPU in the kernel log (gpu.amdgpu_errors: failed init, RAS threshold); "
                        "reseat or replace it.")
    if want is not None and physical != want:
        return finding(FAIL, "%d AMD GPUs where %d are expected%s" % (physical, want, " (%d logical devices, partition %s)" % (
            len(gpus), "/".join(modes)) if len(gpus) != physical else ""), details,
            remediation="Look for the missing GPU in the kernel log (gpu.amdgpu_errors); fix hydra_expect.gpu_count "
                        "when the group's expectation is wrong.")
    if kfd is not None and kfd["gpu_nodes"] < len(gpus):
        return finding(WARN, "%d AMD GPU(s) listed but only %d usable by ROCm (KFD topology nodes)" % (
            len(gpus), kfd["gpu_nodes"]), details,
            remediation="Check /dev/kfd permissions (render/video group) and the amdgpu kernel log.")
    names = ", ".join(sorted(set(g["name"] or "?" for g in gpus)))
    logical = " (%d logical devices, partition %s)" % (len(gpus), "/".join(modes)) if len(gpus) != physical else ""
    if want is None:
        return finding(PASS, "%d AMD GPU(s): %s%s (no gpu_count expected)" % (physical, names or "none", logical), details)
    return finding(PASS, "%d AMD GPUs, as expected%s" % (physical, logical), details)


def kernel_module(probes: Probes) -> Finding:
    """driver.kernel_module on an AMD host: amdgpu loaded, DKMS (its version) or in-box (the kernel's)."""
    data = _amd(probes)
    module = data.get("kernel_module") or {}
    details = dict(module, driver_version=data.get("driver_version"), kernel_release=data.get("kernel_release"))
    if not module.get("loaded"):
        if data.get("pci_gpus"):
            return finding(FAIL, "AMD GPU(s) on the PCI bus but the amdgpu kernel module is not loaded", details,
                           remediation="Load amdgpu (`modprobe amdgpu`) and read `dmesg | grep amdgpu` for errors.")
        return finding(SKIP, "the amdgpu kernel module is not loaded here (no /sys/module/amdgpu)", details)
    tool = data.get("driver_version")
    if module.get("version") and tool and tool != module["version"]:
        return finding(FAIL, "amdgpu module %s but %s reports driver %s: reboot or reload the module" % (
            module["version"], data.get("source"), tool), details,
            remediation="Reboot the node so the loaded amdgpu module matches the installed one.")
    if module.get("version"):
        return finding(PASS, "amdgpu %s (ROCm DKMS driver) loaded" % module["version"], details)
    return finding(PASS, "amdgpu loaded: the distribution's in-box driver%s" % (
        " (kernel %s)" % data["kernel_release"] if data.get("kernel_release") else ""), details)


@check("driver.amd_smi", "amd-smi works", uses=("amd_smi",))
def amd_smi_works(probes: Probes, expect: Expect) -> Finding:
    """Reads whether amd-smi (else rocm-smi, else sysfs) lists the AMD GPUs, and the AMD GPUs on the PCI bus.

    PASS when a tool answers with GPU records; ERROR when amd-smi or rocm-smi fails, hangs or writes
    JSON that cannot be read; FAIL when AMD GPUs sit on the PCI bus and no tool nor amdgpu device
    lists them, or when a tool lists none of them; SKIP on a host with no AMD GPU and no AMD tool.

    Remediation: install ROCm's amd-smi (or rocm-smi) and load amdgpu; a tool that fails or hangs
    points at a GPU or driver fault: read the kernel log (gpu.amdgpu_errors), then reset the GPU or reboot.
    """
    envelope = probes["amd_smi"]
    if envelope["status"] == READ_FAILED:
        return finding(ERROR, "amd-smi failed: %s" % envelope["reason"],
                       remediation="Run `amd-smi static` by hand; an error or hang usually means a GPU or driver "
                                   "fault: read the kernel log (gpu.amdgpu_errors), then reset the GPU or reboot.")
    if envelope["status"] == READ_ABSENT:
        return finding(SKIP, envelope["reason"])
    data = _amd(probes)
    problems: list[str] = data.get("problems") or []
    on_bus: list[dict[str, Any]] = data.get("pci_gpus") or []
    details = {"source": data.get("source"), "driver_version": data.get("driver_version"),
               "driver_kind": data.get("driver_kind"), "kernel_release": data.get("kernel_release"),
               "problems": problems, "gpus": [gpu_ref(g) for g in data["gpus"]], "pci_gpus": on_bus}
    if not data["gpus"]:
        return finding(FAIL, "%d AMD GPU(s) on the PCI bus but none listed: %s" % (
            len(on_bus), "; ".join(problems) or "no GPU record"), details,
            remediation="Install ROCm (amd-smi) and make sure amdgpu binds the GPUs (`dmesg | grep amdgpu`).")
    driver = data.get("driver_version") or ("in-box driver, kernel %s" % data.get("kernel_release")
                                            if data.get("driver_kind") == "in-box" else "driver version unknown")
    return finding(PASS, "%s answers: %s, %d GPU(s)" % (data["source"], driver, len(data["gpus"])), details)


@check("gpu.xgmi", "XGMI links", requires=("amd_smi",))
def xgmi(probes: Probes, expect: Expect) -> Finding:
    """Reads each AMD GPU's XGMI error status (amd-smi metric xgmi_err) and its XGMI_WAFL RAS block counts.

    FAIL on an XGMI error status of ERROR or MULTIPLE_ERRORS (an error count above 0 where a tool
    gives a count) or an uncorrectable XGMI_WAFL error (a link fault); WARN on correctable
    XGMI_WAFL errors; PASS on NO_ERRORS and zero counts; SKIP when no GPU reports them (PCIe-only
    boards; MI300X reports "N/A" for xgmi_err and counts XGMI_WAFL instead; N/A never FAILs). A
    status amd-smi does not have is an ERROR naming the GPU.

    Remediation: drain the node and reset the GPUs; if errors return on the same link, the baseboard or
    GPU needs service.
    """
    results = []
    gpus = _amd(probes)["gpus"]
    for gpu in gpus:
        count, status = ((gpu.get("xgmi") or {}).get(key) for key in ("error_count", "error_status"))
        faulty = status in XGMI_FAULTS
        wafl = (gpu.get("ras_blocks") or {}).get("XGMI_WAFL") or {}
        judged = wafl if wafl.get("enabled") is not False else {}
        if count is None and not faulty and judged.get("uncorrectable") is None and judged.get("correctable") is None:
            continue
        detail = dict(gpu_ref(gpu), xgmi_error_count=count, xgmi_error_status=status, xgmi_wafl=judged or None)
        if faulty:
            results.append((FAIL, detail, "XGMI error status %s" % status))
        elif count:
            results.append((FAIL, detail, "XGMI error count %s" % count))
        elif judged.get("uncorrectable"):
            results.append((FAIL, detail, "%s uncorrectable XGMI_WAFL errors" % judged["uncorrectable"]))
        elif judged.get("correctable"):
            results.append((WARN, detail, "%s correctable XGMI_WAFL errors" % judged["correctable"]))
        else:
            results.append((PASS, detail, "no XGMI error"))
    return verdict(with_unreadable(results, gpus, ("xgmi",)), "no XGMI error on %d GPU(s)" % len(results),
                   "Drain the node and reset the GPUs (`amd-smi reset -G`); if errors return on the same link, have "
                   "the baseboard or GPU serviced.", skip_message="no GPU reports XGMI error counts")


@check("gpu.partition", "AMD partition modes", requires=("amd_smi",))
def partition(probes: Probes, expect: Expect) -> Finding:
    """Reads each AMD GPU's compute partition (SPX, DPX, QPX, CPX) and memory partition (NPS1, NPS2, NPS4),
    against `amd_compute_partition` / `amd_memory_partition`.

    FAIL when a GPU's mode differs from the expected one, or when the GPUs of a host differ in mode
    without an expectation (WARN); PASS otherwise (informational without an expectation); SKIP when
    no GPU reports a partition mode (only MI300-class GPUs have them; "N/A" never FAILs).

    Remediation: `amd-smi set -C <mode>` / `amd-smi set -M <mode>` (needs the GPUs idle, then a reload
    of amdgpu), or fix hydra_expect.
    """
    want_compute = (_expect.get(expect, COMPUTE_PARTITION) or "").strip().upper() or None
    want_memory = (_expect.get(expect, MEMORY_PARTITION) or "").strip().upper() or None
    if want_compute and want_compute not in PARTITION_DEVICES:
        return finding(ERROR, "expect.%s: %r is not one of: %s" % (COMPUTE_PARTITION, want_compute, ", ".join(PARTITION_DEVICES)))
    results = []
    modes = set()
    for gpu in _amd(probes)["gpus"]:
        part = gpu.get("partition") or {}
        compute, memory = (part.get("compute") or "").upper() or None, (part.get("memory") or "").upper() or None
        if compute is None and memory is None:
            continue
        modes.add((compute, memory))
        detail = dict(gpu_ref(gpu), compute_partition=compute, memory_partition=memory,
                      expected_compute=want_compute, expected_memory=want_memory)
        wrong = ["compute %s (expected %s)" % (compute, want_compute)] if want_compute and compute != want_compute else []
        wrong += ["memory %s (expected %s)" % (memory, want_memory)] if want_memory and memory != want_memory else []
        results.append((FAIL, detail, ", ".join(wrong)) if wrong else (PASS, detail, "%s/%s" % (compute, memory)))
    if not (want_compute or want_memory) and len(modes) > 1:
        results = [(WARN, r[1], "modes differ between the GPUs of this host") for r in results]
    summary = ", ".join("%s/%s" % mode for mode in sorted(modes, key=str))
    return verdict(results, "partition modes %s on %d GPU(s)%s" % (summary, len(results), "" if (
        want_compute or want_memory) else " (no amd_compute_partition/amd_memory_partition expected)"),
        "Set the mode with `amd-smi set -C <SPX|DPX|QPX|CPX>` / `amd-smi set -M <NPS1|NPS4>` on idle GPUs, or fix "
        "hydra_expect.", skip_message="no GPU reports a partition mode (only MI300-class GPUs have them)")


@check("gpu.amdgpu_errors", "amdgpu errors in the kernel log", requires=("amdgpu_log",), uses=("amd_smi",))
def amdgpu_errors(probes: Probes, expect: Expect) -> Finding:
    """Reads the amdgpu lines of the kernel log within `xid_window_hours` (default 24), counted per (GPU address, kind).

    FAIL on an uncorrectable RAS error (`uncorrectable hardware error(ERREVENT_...)`, `N uncorrectable
    hardware errors detected in <block>`, an ACA/MCA record with the UC bit, poison consumption), a
    bad-page table at its threshold (`RAS records ... exceed threshold`), a GPU that failed to
    initialise (`Fatal error during GPU init`, `probe of ... failed`), and a failed reset (`GPU
    reset begin!` followed by `Failed to disable DPM`, an SMU failure or `reset failed`). WARN on
    correctable RAS errors, ring timeouts, a recovered reset, `VRAM is lost` and a reset with no
    outcome logged. Application page faults (`[gfxhub] page fault ... for process`,
    `VM_L2_PROTECTION_FAULT_STATUS`) are not hardware faults: listed with their processes, PASS.
    Healthy boot lines that mention RAS or ECC pass. SKIP on a host without AMD GPU and nothing in
    the log. An amdgpu line that cannot be read is skipped and counted in details.bad_lines, the rest
    graded; with nothing else found the check is WARN, never PASS. Every event is judged inside the window and the
    message says when it last happened; one of unknown time (no timestamp, read from a dmesg without its window) is a
    WARN, never a FAIL.

    Remediation: drain the node, then power-cycle for a failed reset, reset or reboot for an
    uncorrectable error, and replace a GPU at its bad-page threshold or failing to initialise.
    """
    log = probes["amdgpu_log"]["data"]
    amd = probes["amd_smi"]
    window = "last %d h" % log["window_hours"] if log["window_applied"] else "log since boot"
    counts = log.get("counts") or []
    if not counts:
        if amd["status"] == READ_ABSENT:
            return finding(SKIP, "no amdgpu event in the kernel log (%s) and no AMD GPU: %s" % (window, amd["reason"]))
        return finding(PASS, "no amdgpu event in the kernel log (%s, from %s)" % (window, log["source"]),
                       {"source": log["source"], "window_hours": log["window_hours"]})
    by_pci = dict((pci_key(g["pci_bus_id"]), g) for g in ((amd["data"] or {}).get("gpus") or [])
                  if amd["status"] == READ_OK)
    entries = []
    for group in counts:
        status, meaning, action = AMDGPU_EVENTS[group["kind"]]
        gpu = by_pci.get(group["pci"])
        entry = dict(gpu_ref(gpu) if gpu else {"index": None, "pci_bus_id": group["pci"], "uuid": None, "name": None},
                     kind=group["kind"], status=status, description=meaning, count=group["count"],
                     first_seen=group["first_seen"], last_seen=group["last_seen"], last_message=group["last_message"],
                     processes=group["processes"])
        # Judged inside the window: an event of unknown time is never a FAIL (checks/events.py).
        entry["status"], entry["held"] = events.dated(status, entry, log)
        entry["when"] = events.when(entry, log)
        entries.append((entry, action))
    details = {"source": log["source"], "window_hours": log["window_hours"], "window_applied": log["window_applied"],
               "gpus": [e for e, _a in entries], "events_total": log.get("events_total"),
               "events_dropped": log.get("events_dropped")}
    status = worst(e["status"] for e, _a in entries)
    if status == PASS:
        faults = sum(e["count"] for e, _a in entries)
        processes = sorted(set(p for e, _a in entries for p in e["processes"]))
        return finding(PASS, "no amdgpu hardware fault (%s); %d application page fault line(s) listed%s" % (
            window, faults, ": %s" % ", ".join(processes[:5]) if processes else ""), details)
    top = [(e, a) for e, a in entries if e["status"] == status]
    named = "; ".join("%s x%d on %s, %s%s" % (e["description"], e["count"], gpu_name(e), e["when"],
                                              " (%s)" % e["held"] if e["held"] else "")
                      for e, _a in top[:3])
    more = " (and %d more)" % (len(top) - 3) if len(top) > 3 else ""
    actions = list(OrderedDict.fromkeys(a for _e, a in top if a))
    return finding(status, "%s%s (%s)" % (named, more, window), details,
                   remediation="Drain the node, then %s; events stay in this check until they age out of the %d h "
                               "window." % ("; ".join(actions), log["window_hours"]))
