# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU fabric checks: NVLink link states and the Fabric Manager of NVSwitch hosts.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.per_gpu import gpu_detail, gpu_records, verdict
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_name, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, WARN


def _by_uuid_or_index(gpus: Iterable[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    table = {}
    for gpu in gpus:
        table[gpu["uuid"]] = gpu
        table[gpu["index"]] = gpu
    return table


@check("gpu.nvlink", "NVLink links", requires=("nvidia_smi", "nvlink"))
def nvlink(probes: Probes, expect: Expect) -> Finding:
    """Reads the state (and, from nvidia-smi, speed) of every NVLink link of every GPU.

    FAIL when some links of a GPU are inactive while others are up, or when an SXM GPU has no
    active link; WARN when no link is active on a PCIe board (no bridge fitted?), when a link
    state is unreadable, or when a link runs slower than the others. PASS when all links are up
    at one speed; SKIP on GPUs without NVLink.

    Remediation: reset the GPUs; on NVSwitch systems check gpu.fabric_manager; reseat NVLink
    bridges on PCIe boards.
    """
    known = _by_uuid_or_index(gpu_records(probes))
    results = []
    for linked in probes["nvlink"]["data"]["gpus"]:
        links = linked["links"]
        if not links:
            continue
        gpu = known.get(linked["uuid"]) or known.get(linked["index"]) or {
            "index": linked["index"], "uuid": linked["uuid"], "name": linked["name"], "pci_bus_id": None}
        down = [link["link"] for link in links if link["active"] is False]
        unknown = [link["link"] for link in links if link["active"] is None]
        speeds = sorted(set(link["speed_gbps"] for link in links if link["speed_gbps"] is not None))
        detail = gpu_detail(gpu, links=len(links), inactive=down, unknown=unknown, speeds_gbps=speeds)
        if down and len(down) < len(links):
            results.append((FAIL, detail, "%d of %d links inactive (%s)" % (len(down), len(links), ", ".join(map(str, down)))))
        elif down and "SXM" in (gpu.get("name") or ""):
            results.append((FAIL, detail, "no active NVLink on an SXM GPU (%d links down)" % len(links)))
        elif down:
            results.append((WARN, detail, "no active NVLink (%d links): no bridge fitted?" % len(links)))
        elif unknown:
            results.append((WARN, detail, "state of link(s) %s unreadable" % ", ".join(map(str, unknown))))
        elif len(speeds) > 1:
            results.append((WARN, detail, "links at different speeds: %s GB/s" % ", ".join("%g" % s for s in speeds)))
        else:
            results.append((PASS, detail, "%d links up" % len(links)))
    return verdict(results, "all NVLink links up on %d GPU(s)" % len(results),
                   {FAIL: "Reset the GPUs; on NVSwitch systems check gpu.fabric_manager; if links stay down, the "
                    "GPU board or baseboard needs service.",
                    WARN: "Check NVLink bridges (PCIe boards) or exclude gpu.nvlink where none is fitted by design."},
                   skip_message="no GPU has NVLink")


@check("gpu.fabric_manager", "Fabric Manager (NVSwitch systems)", requires=("nvidia_smi", "fabric_manager"))
def fabric_manager(probes: Probes, expect: Expect) -> Finding:
    """Reads whether the nvidia-fabricmanager service is active, each GPU's fabric state and status, and the Fabric Manager log.

    On NVSwitch systems: FAIL when the service is not active, or when a GPU reports a fabric
    state other than Completed or a status other than Success (its NVLinks are not usable), or when
    the Fabric Manager log (`fabric_manager_log`, default /var/log/fabricmanager.log) reports a fatal
    NVSwitch error within `xid_window_hours` (naming the NVSwitch PCI address); WARN for a non-fatal
    NVSwitch error or another [ERROR] entry there, and when the service state cannot be read (no
    systemctl) and no GPU reports its fabric state. A missing log is not judged (Fabric Manager may log
    to the journal only). PASS otherwise; SKIP on hosts without NVSwitch.

    Remediation: `systemctl restart nvidia-fabricmanager` (its version must equal the driver's),
    read `journalctl -u nvidia-fabricmanager`, then reset the GPUs; for a fatal NVSwitch error, reboot the node.
    """
    manager = probes["fabric_manager"]["data"]
    state = manager["active_state"]
    gpus = gpu_records(probes)
    untrained = [g for g in gpus if (g["fabric"]["state"] not in (None, "Completed")
                                     or g["fabric"]["status"] not in (None, "Success"))]
    reporting = [g for g in gpus if g["fabric"]["state"] is not None]
    details = {"service": manager["service"], "active_state": state, "nvswitches": manager["nvswitches"],
               "gpus": [gpu_detail(g, fabric_state=g["fabric"]["state"], fabric_status=g["fabric"]["status"])
                        for g in (untrained or reporting)]}
    remedy = ("Run `systemctl restart nvidia-fabricmanager` (its version must equal the driver's), read "
              "`journalctl -u nvidia-fabricmanager`, then reset the GPUs.")
    if state is not None and state != "active":
        message = "%s is %s on a host with %d NVSwitch(es)" % (manager["service"], state, len(manager["nvswitches"]))
        return finding(FAIL, message, details, remedy)
    if untrained:
        return finding(FAIL, "%d GPU(s) not on the fabric: %s" % (len(untrained), "; ".join(
            "%s state %s, status %s" % (gpu_name(gpu_ref(g)), g["fabric"]["state"], g["fabric"]["status"])
            for g in untrained[:3])), details, remedy)
    log = manager.get("log") or {}
    switch_errors = log.get("nvswitch_errors") or []
    if log:
        details["log"] = {"path": log.get("path"), "status": log.get("status"), "reason": log.get("reason"),
                          "nvswitch_errors": switch_errors, "errors": (log.get("errors") or [])[-10:],
                          "errors_total": log.get("errors_total", 0)}
    fatal = [e for e in switch_errors if e["fatal"]]
    named = "; ".join("%s error %d x%d on NVSwitch %s" % ("fatal" if e["fatal"] else "non-fatal", e["code"], e["count"],
                                                          e["device"] or "?") for e in (fatal or switch_errors)[:3])
    if fatal:
        return finding(FAIL, "Fabric Manager log %s: %s" % (log["path"], named), details,
                       "Reboot the node to reset the NVSwitches and GPUs, then check `systemctl status nvidia-fabricmanager`; "
                       "if the error returns on the same NVSwitch, the baseboard needs service.")
    if switch_errors or log.get("errors_total"):
        last = log["errors"][-1]["message"] if log.get("errors") else "?"
        phrase = named or "%d [ERROR] entr%s, last: %s" % (log["errors_total"], "y" if log["errors_total"] == 1 else "ies", last)
        return finding(WARN, "Fabric Manager log %s: %s" % (log["path"], phrase), details,
                       "Read the Fabric Manager log; collect `nvidia-bug-report.sh` if NVSwitch errors repeat.")
    if state is None and not reporting:
        return finding(WARN, "cannot tell whether %s runs (no systemctl) and no GPU reports a fabric state"
                       % manager["service"], details, "Check the Fabric Manager service by hand on this host.")
    return finding(PASS, "%s %s; %d of %d GPU(s) report fabric state Completed" % (
        manager["service"], state or "state unknown", len(reporting), len(gpus)), details)
