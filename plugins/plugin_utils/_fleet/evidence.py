# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Evidence bundles: one record per failing GPU, what an RMA ticket to the vendor needs (pure).

A GPU has evidence when this run has a FAIL check naming it (details.gpus, the GPU's own status FAIL
where the check grades each GPU) or when the report's ``findings`` list has an open FAIL finding for its
UUID. The record names the board (host, PCI address, UUID, serial, board part number, VBIOS, driver,
from doctor's environment), lists the failing checks with their details narrowed to that GPU, the
finding's history, the kernel-log events (Xid, GPU loss) gpu.xid_errors saw for it and the NVSwitch
SXids of its host, and the ``nvidia-bug-report.sh`` command to run before any reset.

The callback writes each record to ``evidence/<host>/<uuid>.json`` under the report directory
(evidence_path(): file names made safe, so no host name can leave that directory) and lists the
links in the report's ``evidence``.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import xid_table
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL

EVIDENCE_DIR = "evidence"
EVIDENCE_KIND = "continuum.hydra.gpu_evidence"
EVIDENCE_VERSION = "1.0"
XID_CHECK = "gpu.xid_errors"
# Where the bug report goes on the host: /var/tmp survives a reboot, unlike /tmp on many distributions.
BUG_REPORT_DIR = "/var/tmp"
IDENTITY = ("index", "name", "pci_bus_id", "uuid", "serial", "board_part_number", "vbios_version", "driver_version")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 96


def safe_name(text: object) -> str:
    """A file name made of [A-Za-z0-9_.-] only, never starting with a dot; a name that had to change gets a
    short hash of the original, so two different texts never share a file."""
    raw = "" if text is None else str(text)
    name = _UNSAFE.sub("_", raw).lstrip(".")[:_MAX_NAME]
    if name != raw or not name:
        name = "%s-%s" % (name or "_", hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:10])
    return name


def evidence_path(host: str, gpu_key: str) -> str:
    """The record's path relative to the report directory, with / separators (a link from the .md and .html)."""
    return "/".join((EVIDENCE_DIR, safe_name(host), safe_name(gpu_key) + ".json"))


def bug_report_command(host: str, gpu_key: str) -> dict[str, str]:
    """The nvidia-bug-report.sh run to attach to the ticket; it writes <output>.gz."""
    output = "%s/nvidia-bug-report-%s-%s.log" % (BUG_REPORT_DIR, safe_name(host), safe_name(gpu_key))
    return {"command": "sudo nvidia-bug-report.sh --output-file %s" % output, "output": output + ".gz",
            "when": "on %s, before resetting the GPU or rebooting: a reset clears the state NVIDIA support asks for" % host}


def _key(gpu: Mapping[str, Any]) -> Optional[str]:
    """How a GPU is told apart within a host: its UUID, else its PCI address, else its index."""
    if gpu.get("uuid"):
        return str(gpu["uuid"])
    address = pci_key(gpu.get("pci_bus_id"))
    if address:
        return "pci-%s" % address
    if gpu.get("index") is not None:
        return "index-%s" % gpu["index"]
    return None


class _HostGpus:
    """doctor's environment GPUs of one host, found by UUID, PCI address or index."""

    def __init__(self, env_gpus: Iterable[Any]) -> None:
        self.gpus = [g for g in env_gpus if isinstance(g, Mapping)]

    def find(self, ref: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
        uuid, address, index = ref.get("uuid"), pci_key(ref.get("pci_bus_id")), ref.get("index")
        for gpu in self.gpus:
            if uuid and gpu.get("uuid") == uuid:
                return gpu
        for gpu in self.gpus:
            if address and pci_key(gpu.get("pci_bus_id")) == address:
                return gpu
        if not uuid and not address and index is not None:
            for gpu in self.gpus:
                if gpu.get("index") == index:
                    return gpu
        return None

    def same(self, ref: Mapping[str, Any], key: str) -> bool:
        """Whether a per-GPU entry names the GPU of this key."""
        known = self.find(ref)
        return _key(known if known is not None else ref) == key


def _gpu_status(entry: Mapping[str, Any], check_status: str) -> str:
    """A GPU's own verdict within a check: its status, the FAIL of a critical kernel-log event, else the check's."""
    if entry.get("status"):
        return str(entry["status"])
    if "severity" in entry:
        return FAIL if entry.get("severity") == xid_table.CRITICAL else ""
    return check_status


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _doctor(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(entry.get("doctor"))


def _checks(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in _doctor(entry).get("checks") or [] if isinstance(c, Mapping)]


def _gpu_list(details: Any) -> list[Mapping[str, Any]]:
    gpus = details.get("gpus") if isinstance(details, Mapping) else None
    return [g for g in gpus or [] if isinstance(g, Mapping)]


def _finding_uuid(finding: Mapping[str, Any]) -> Optional[str]:
    gpu = finding.get("gpu")
    for value in (finding.get("gpu_uuid"), finding.get("uuid"), gpu.get("uuid") if isinstance(gpu, Mapping) else None):
        if value:
            return str(value)
    return None


def _open_fail_findings(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The report's findings that are open FAILs naming a host and a GPU (keys read loosely)."""
    out = []
    for finding in report.get("findings") or []:
        if not isinstance(finding, Mapping) or not finding.get("host") or not _finding_uuid(finding):
            continue
        status = finding.get("status") or finding.get("worst_status")
        if status == FAIL and finding.get("open", True):
            out.append(finding)
    return out


def _narrowed(chk: Mapping[str, Any], gpus: _HostGpus, key: str) -> dict[str, Any]:
    """A failing check with its details.gpus (and counts_by_gpu) narrowed to the GPU of key."""
    details = _mapping(chk.get("details"))
    narrowed = dict(details)
    for list_key in ("gpus", "counts_by_gpu"):
        if isinstance(details.get(list_key), list):
            narrowed[list_key] = [g for g in details[list_key] if isinstance(g, Mapping) and gpus.same(g, key)]
    return {"id": chk.get("id"), "title": chk.get("title"), "status": chk.get("status"), "message": chk.get("message"),
            "remediation": chk.get("remediation"), "details": narrowed}


def _kernel_log(checks: Iterable[Mapping[str, Any]], gpus: _HostGpus, key: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the GPU's Xid / GPU-loss events, the host's NVSwitch SXid events) from gpu.xid_errors's details."""
    events: list[dict[str, Any]] = []
    switches: list[dict[str, Any]] = []
    for chk in checks:
        if chk.get("id") != XID_CHECK:
            continue
        details = _mapping(chk.get("details"))
        for entry in _gpu_list(details):
            if gpus.same(entry, key):
                events.append(dict((k, entry.get(k)) for k in (
                    "xid", "loss", "mnemonic", "description", "severity", "nvidia_action", "count", "first_seen", "last_seen",
                    "last_message") if k in entry))
        for entry in details.get("nvswitches") or []:
            if isinstance(entry, Mapping):
                switches.append(dict(entry))
        source = details.get("source")
        for event in events:
            event.setdefault("source", source)
    return events, switches


def _identity(host_gpu: Optional[Mapping[str, Any]], ref: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, Any]:
    known = host_gpu or {}
    out = dict((k, known.get(k) if known.get(k) is not None else ref.get(k)) for k in IDENTITY)
    if out["driver_version"] is None:
        out["driver_version"] = env.get("driver_version")
    return out


def build_evidence(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One evidence record per (host, GPU) with a FAIL in this run or an open FAIL finding; sorted by host, then path."""
    # host -> GPU -> its findings: each host looks up its own (a scan of all per host was quadratic in the fleet)
    findings_by_host: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for finding in _open_fail_findings(report):
        findings_by_host.setdefault(str(finding["host"]), {}).setdefault(str(_finding_uuid(finding)), []).append(finding)
    records = []
    hosts = report.get("hosts") or {}
    for host in sorted(hosts):
        entry = _mapping(hosts[host])
        env = _mapping(_doctor(entry).get("environment"))
        gpus = _HostGpus(env.get("gpus") or [])
        checks = _checks(entry)
        failing: dict[str, tuple[Mapping[str, Any], list[Mapping[str, Any]]]] = {}  # key -> (ref, [check])
        for chk in checks:
            if chk.get("status") != FAIL:
                continue
            for ref in _gpu_list(chk.get("details")):
                if _gpu_status(ref, FAIL) != FAIL:
                    continue
                known = gpus.find(ref)
                key = _key(known if known is not None else ref)
                if key is None:
                    continue
                named = failing.setdefault(key, (known or ref, []))[1]
                if chk not in named:
                    named.append(chk)
        findings_by_gpu = findings_by_host.get(host, {})
        for uuid in findings_by_gpu:
            if uuid not in failing:
                known = gpus.find({"uuid": uuid})
                failing[uuid] = (known or {"uuid": uuid}, [])
        for key in sorted(failing):
            ref, named = failing[key]
            events, switches = _kernel_log(checks, gpus, key)
            identity = _identity(gpus.find(ref), ref, env)
            record: dict[str, Any] = {
                "kind": EVIDENCE_KIND, "schema_version": EVIDENCE_VERSION, "generated_at": report.get("generated_at"),
                "host": host, "path": evidence_path(host, key),
            }
            record.update(identity)
            record.update({
                "failing_checks": [_narrowed(chk, gpus, key) for chk in named],
                "findings": [dict(f) for f in findings_by_gpu.get(identity["uuid"] or key, [])],
                "kernel_log": events,
                "nvswitch_events": switches,
                "bug_report": bug_report_command(host, key),
            })
            records.append(record)
    return records


def evidence_links(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What the fleet report lists: [{host, uuid, pci_bus_id, serial, path}] per record."""
    return [dict((k, r.get(k)) for k in ("host", "uuid", "pci_bus_id", "serial", "path")) for r in records]
