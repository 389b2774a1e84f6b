# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Xid check: NVRM Xid lines, GPU loss without an Xid and NVSwitch SXids in the kernel log, graded by
NVIDIA's catalogue (_host/gpus/xid_table.py) and hydra_expect.xid_policy.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import events
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import xid_table
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_name, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, READ_ABSENT, READ_OK, SKIP, WARN, worst


def _xid_info(code: int) -> dict[str, Any]:
    mnemonic, action = xid_table.XID_CATALOG.get(code, (None, None))
    severity = xid_table.SEVERITY_OVERRIDES.get(code) or xid_table.SEVERITY_BY_ACTION.get(action or "") or xid_table.WARNING
    return {"mnemonic": mnemonic, "nvidia_action": action, "severity": severity,
            "description": xid_table.DESCRIPTIONS.get(code) or mnemonic or "not in NVIDIA's XID catalogue"}


_SEVERITY_RANK = {xid_table.INFO: 0, xid_table.WARNING: 1, xid_table.CRITICAL: 2}


def _log_gpu(pci: Optional[str], by_pci: Mapping[Optional[str], Any], uuids: Mapping[str, str]) -> dict[str, Any]:
    """The GPU a kernel-log line names: nvidia-smi's record, else its address and the UUID the log maps to it."""
    gpu = by_pci.get(pci) if pci else None
    if gpu:
        return gpu_ref(gpu)
    return {"index": None, "pci_bus_id": pci, "uuid": uuids.get(pci) if pci else None, "name": None}


def _times(group: Mapping[str, Any]) -> dict[str, Any]:
    return {"count": group["count"], "first_seen": group["first_seen"], "last_seen": group["last_seen"],
            "last_message": group["last_message"]}


XID_POLICY = _expect.key("xid_policy")
XID_WINDOW = _expect.key("xid_window_hours")


def xid_policy(expect: Expect) -> dict[int, dict[str, Any]]:
    """hydra_expect.xid_policy by XID code, each rule with its count and window filled in (validated by _expect)."""
    window = _expect.get(expect, XID_WINDOW)
    return dict((_expect.xid_code(code) or 0, {"severity": rule["severity"], "count": rule.get("count", 1),
                                               "window_hours": rule.get("window_hours") or window})
                for code, rule in (_expect.get(expect, XID_POLICY) or {}).items())


def _apply_policy(entry: dict[str, Any], group: Mapping[str, Any], rule: Mapping[str, Any], window_hours: float) -> None:
    """The site's rule for this code: its severity once ``count`` events hit the GPU within ``window_hours``."""
    hours = rule["window_hours"]
    seen = group["count"] if hours >= window_hours else (group.get("within") or {}).get("%g" % hours, 0)
    applied = seen >= rule["count"]
    entry["policy"] = dict(rule, seen=seen, applied=applied, catalogue_severity=entry["severity"])
    if applied:
        entry["severity"] = rule["severity"]
        entry["description"] = "%s; site policy: %s after %d in %g h" % (entry["description"], rule["severity"], rule["count"], hours)


def _xid_entry(group: Mapping[str, Any], by_pci: Mapping[Optional[str], Any], uuids: Mapping[str, str],
               counts: Sequence[Mapping[str, Any]], policy: Optional[Mapping[int, Mapping[str, Any]]] = None,
               window_hours: float = 24) -> dict[str, Any]:
    """One (address, code) of the window, graded; an Xid 45 naming an absent cause is graded as that cause; the site's
    xid_policy rule for the code, when there is one, last."""
    entry = dict(_log_gpu(group["pci"], by_pci, uuids), xid=group["code"], **_times(group))
    entry.update(_xid_info(group["code"]))
    causes = sorted(int(code) for code in (group.get("caused_by") or {}))
    if group["code"] in xid_table.LINKED_BY_CAUSE and causes:
        entry["caused_by"] = causes
        present = set(other["code"] for other in counts if other["pci"] == group["pci"])
        absent = [(code, _xid_info(code)) for code in causes if code not in present]
        if absent:
            code, info = max(absent, key=lambda item: _SEVERITY_RANK[item[1]["severity"]])
            entry.update(graded_as=code, severity=info["severity"], nvidia_action=info["nvidia_action"],
                         description="%s, caused by XID %d (%s), which is not itself in the window" % (
                             entry["description"], code, info["description"]))
    rule = (policy or {}).get(group["code"])
    if rule is not None:
        _apply_policy(entry, group, rule, window_hours)
    return entry


def _loss_entry(group: Mapping[str, Any], by_pci: Mapping[Optional[str], Any], uuids: Mapping[str, str]) -> dict[str, Any]:
    """A GPU lost without an Xid line: always critical."""
    description, action = xid_table.LOSS_CATALOG[group["kind"]]
    entry = dict(_log_gpu(group["pci"], by_pci, uuids), xid=None, loss=group["kind"], driver_instance=group.get("instance"),
                 **_times(group))
    entry.update(mnemonic=None, nvidia_action=action, severity=xid_table.CRITICAL, description=description)
    return entry


def _sxid_entry(group: Mapping[str, Any]) -> dict[str, Any]:
    """An NVSwitch SXid (address, code): fatal from the line's own word, else from the SXid table."""
    name, table_fatal = xid_table.SXID_CATALOG.get(group["code"], (None, None))
    fatal = group.get("fatal")
    fatal = table_fatal if fatal is None else fatal
    return dict(nvswitch=group.get("device") or group["address"], pci_bus_id=group["address"],
                device_name="nvidia-nvswitch%s" % group.get("switch", "?"), sxid=group["code"], fatal=fatal,
                description=name or "SXid %d" % group["code"],
                nvidia_action="NVSWITCH_FATAL" if fatal else "NVSWITCH_NON_FATAL",
                severity=xid_table.CRITICAL if fatal else xid_table.WARNING, **_times(group))


def _event_label(entry: Mapping[str, Any]) -> str:
    """How a kernel-log finding names its device: its GPU (_results.gpu_name), else the driver's GPU number."""
    if entry.get("nvswitch"):
        return "NVSwitch %s (%s)" % (entry["nvswitch"], entry["device_name"])
    if entry.get("index") is None and entry.get("pci_bus_id") is None:
        if entry.get("driver_instance"):
            return "%s (the driver's GPU number; the line names no PCI address)" % entry["driver_instance"]
        return "a GPU the line does not name"
    return gpu_name(entry)


def _event_phrase(entry: Mapping[str, Any]) -> str:
    if entry.get("nvswitch"):
        text = "SXid %d (%s, %s) x%d on %s" % (entry["sxid"], entry["description"],
                                               "fatal" if entry["fatal"] else "non-fatal", entry["count"], _event_label(entry))
    elif entry.get("loss"):
        text = "%s x%d on %s" % (entry["description"], entry["count"], _event_label(entry))
    else:
        text = "XID %d (%s) x%d on %s" % (entry["xid"], entry["description"], entry["count"], _event_label(entry))
    return "%s, %s%s" % (text, entry["when"], " (%s)" % entry["held"] if entry.get("held") else "")


_ACTION_ADVICE = OrderedDict((
    ("RESTART_BM", "power-cycle the node"),
    ("RESTART_VM", "restart the VM"),
    ("RESET_GPU", "reset the GPU (`nvidia-smi -r -i <index>`) or reboot"),
    ("WORKFLOW_XID_48", "reset the GPU and replace it if double-bit errors recur"),
    ("WORKFLOW_NVLINK_ERR", "reset the GPUs and check the NVLink/NVSwitch fabric"),
    ("WORKFLOW_NVLINK5_ERR", "reset the GPUs and check the NVLink/NVSwitch fabric"),
    ("CHECK_MECHANICALS", "check power cabling and cooling"),
    ("UPDATE_SWFW", "update the driver and firmware"),
    ("CHECK_UVM", "check the nvidia-uvm module"),
    ("UNEXPECTED_ERR_REPORT_ISSUE", "collect `nvidia-bug-report.sh` and report it to NVIDIA"),
    ("NVSWITCH_FATAL", "reboot the node to reset the NVSwitches and GPUs, then check gpu.fabric_manager"),
    ("NVSWITCH_NON_FATAL", "watch the NVSwitch; collect `nvidia-bug-report.sh` if the SXid repeats"),
))


@check("gpu.xid_errors", "XID errors in the kernel log", requires=("kernel_log",), uses=("nvidia_smi",))
def xid_errors(probes: Probes, expect: Expect) -> Finding:
    """Reads the kernel log within `xid_window_hours` (default 24): NVRM Xid lines, GPU loss without an Xid, NVSwitch SXids.

    Every event in the window is counted per (GPU address, code), so an application Xid storm never
    hides a fatal Xid; details list each (address, code) with its count, first and last time, and the
    probe lists only a sample of the events (`xids_dropped` says how many it left out). Each GPU is
    named by its nvidia-smi index, else by its PCI address and the UUID the log maps to it.

    Xid codes are graded from NVIDIA's XID catalogue ("Analyzing Xid Errors with the Xid Catalog",
    https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, "Resolution Bucket (Immediate
    Action)", kept as data in xid_table.py): critical (reset the GPU or reboot: 48 DBE, 64, 74 NVLink, 79
    fallen off the bus, 95 uncontained ECC, 119/120 GSP, ...) is a FAIL; warning (63 row remap recorded,
    92 high single-bit ECC rate, 94 contained ECC, codes NVIDIA asks to report, unknown codes) a WARN;
    application faults and benign codes (13, 31, 43, 45, ...) are listed but PASS. An Xid 45 that names its
    cause ("caused by previous Xid 149") is graded as that Xid when that Xid is not itself in the window.

    A GPU lost without an Xid line is a FAIL naming its PCI address: "GPU has fallen off the bus" (one-line
    and three-line forms), `RmInitAdapter failed!` (0x62: GSP firmware), `NV_ERR_RESET_REQUIRED`, the GSP
    timeout banner; a line naming only the driver's GPU number (GPU6) is named by that number.

    NVSwitch SXid lines are graded by their own Fatal / Non-fatal word (FAIL / WARN) and, for lines without
    it, by the SXid table in xid_table.py (NVIDIA Fabric Manager User Guide, DU-09883-001, "NVSwitch SXid
    Errors", https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html), naming the
    NVSwitch PCI address. SKIP on a host with no NVIDIA driver and nothing in the log. A repaired GPU keeps
    failing until its events age out of the window: every event is judged inside it and the message says when it
    last happened; an event of unknown time (busybox dmesg without timestamps, a line without its stamp) is a WARN,
    never a FAIL. Site policy, `xid_policy` (e.g. `{13: {severity: critical, count: 5, window_hours: 6}}` promotes
    Xid 13 to FAIL once 5 hit one GPU within 6 h; `{63: {severity: info}}` demotes 63): a code's rule sets its
    severity once `count` (default 1) events of it hit one GPU within `window_hours` (default `xid_window_hours`, at
    most that); below the count the catalogue's grade stands (details.gpus[].policy says which). A driver line that
    cannot be read (an impossible
    date, a bad UTC offset, a 5,000-digit number) is skipped and counted in details.bad_lines, the rest
    judged: an Xid 79 beside it still FAILs; with nothing else found the check is WARN, never PASS.

    Remediation: drain the node and follow NVIDIA's action for each code (power-cycle for 79 and a GPU
    fallen off the bus, GPU reset or reboot for most others, reboot for a fatal SXid); run
    nvidia-bug-report.sh before a reset when NVIDIA support is involved.
    """
    log = probes["kernel_log"]["data"]
    smi = probes["nvidia_smi"]
    window = "last %d h" % log["window_hours"] if log["window_applied"] else "log since boot"
    counts = log.get("xid_counts") or []
    losses, sxids = log.get("gpu_losses") or [], log.get("sxid_counts") or []
    if not (counts or losses or sxids):
        if smi["status"] == READ_ABSENT:
            return finding(SKIP, "no XID in the kernel log (%s) and no NVIDIA driver: %s" % (window, smi["reason"]))
        return finding(PASS, "no XID in the kernel log (%s, from %s)" % (window, log["source"]),
                       {"source": log["source"], "window_hours": log["window_hours"]})
    by_pci = dict((pci_key(g["pci_bus_id"]), g) for g in (smi["data"]["gpus"] if smi["status"] == READ_OK else []))
    policy = xid_policy(expect)
    entries = [_xid_entry(group, by_pci, log["gpu_uuids"], counts, policy, log["window_hours"]) for group in counts]
    seen = set((group["pci"], group["code"]) for group in counts)
    entries += [_loss_entry(group, by_pci, log["gpu_uuids"]) for group in losses
                if not (group["kind"] == "fallen_off_bus" and (group["pci"], 79) in seen)]
    switches = [_sxid_entry(group) for group in sxids]
    severities = {xid_table.CRITICAL: FAIL, xid_table.WARNING: WARN, xid_table.INFO: PASS}
    for entry in entries + switches:
        # Judged inside the window: an event of unknown time is never a FAIL (checks/events.py).
        entry["status"], entry["held"] = events.dated(severities[entry["severity"]], entry, log)
        entry["when"] = events.when(entry, log)
    status = worst(e["status"] for e in entries + switches)
    details = {"source": log["source"], "window_hours": log["window_hours"], "window_applied": log["window_applied"],
               "gpus": entries, "nvswitches": switches, "xids_total": log.get("xids_total"),
               "xids_dropped": log["xids_dropped"]}
    if status == PASS:
        codes: Counter[int] = Counter()
        for entry in entries:
            codes[entry["xid"]] += entry["count"]
        return finding(PASS, "no hardware XID (%s); %d application-level XID(s) listed: %s" % (
            window, sum(codes.values()), ", ".join("%d x%d" % item for item in sorted(codes.items()))), details)
    top = [e for e in entries + switches if e["status"] == status]
    message = "; ".join(_event_phrase(e) for e in top[:3])
    more = " (and %d more)" % (len(top) - 3) if len(top) > 3 else ""
    actions = list(OrderedDict.fromkeys(
        advice for action, advice in _ACTION_ADVICE.items() if any(e["nvidia_action"] == action for e in top)))
    remediation = "Drain the node, then %s; events stay in this check until they age out of the %d h window." % (
        "; ".join(actions) or "investigate the codes in NVIDIA's XID catalogue", log["window_hours"])
    return finding(status, "%s%s (%s)" % (message, more, window), details, remediation=remediation)
