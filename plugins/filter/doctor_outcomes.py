# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: doctor_outcomes
short_description: One outcome per host from doctor results or a saved fleet report
version_added: 0.1.0
description:
  - Reduces doctor results to what the remediation playbook and the SLURM gate decide on, per host, C(status)
    (V(healthy), V(warning), V(failed), V(error), V(unreachable) or V(unknown)), C(failing_checks) (ids of the
    C(FAIL) and C(ERROR) checks), C(warning_checks) (ids of the C(WARN) checks) and C(message).
  - The input is either C(hostvars) (each host's registered doctor result in the variable O(result_var)) or a
    fleet report (C(fleet-report.json) of the P(continuum.hydra.fleet_report#callback) callback, read with
    C(from_json)).
  - A host without a result (unreachable, or doctor not run) is V(unreachable); a host whose doctor task failed
    without a result, or whose fleet report status is C(task_failed), is V(error); a skipped task is V(unknown).
  - The fabric test's verdict (C(playbooks/fabric.yml), its planner's last result in O(fabric_var)) joins each host's
    checks as C(fabric.collective) and C(fabric.link), as it does in the fleet report. C(proof), when there is one, is the short
    proof of a failing check that has one (the rounds, figure and proven-good partner that isolated a slow host), which
    the SLURM gate appends to its C(hydra:) drain reason.
  - From a fleet report, a host's open interconnect findings (C(findings) with an C(interconnect.*) id, judged
    across runs and hosts by the fleet analysis, docs/interconnect.md) join its checks unless O(interconnect=false).
    An open C(FAIL) (a link_downed increment, an error rate over its fatal limit, a port down where its peers have it
    up, GPUs off their NVLink domain) makes the host V(failed) whatever doctor said this run, its subject and message
    the proof; an open C(WARN) makes a V(healthy) host V(warning). An V(unreachable) host stays so. Doctor's verdict
    of one run cannot see these; registered results carry none.
author:
  - continuum.hydra developers (@continuum-hydra)
options:
  _input:
    description: C(hostvars), or a fleet report dict.
    type: dict
    required: true
  hosts:
    description:
      - The hosts to report on. Defaults to every host of a fleet report; required with C(hostvars).
      - A listed host that a fleet report does not hold is V(unknown).
    type: list
    elements: str
  result_var:
    description: The variable each host registered its doctor result in (C(hostvars) input only).
    type: str
    default: hydra_doctor
  fabric_var:
    description:
      - The variable that holds the fabric test's last planner result (C(hostvars) input only); absent or not done, no
        fabric verdict is added.
    type: str
    default: hydra_fabric_plan
  interconnect:
    description: Whether a fleet report's open interconnect findings join each host's outcome (fleet report input only).
    type: bool
    default: true
seealso:
  - module: continuum.hydra.doctor
  - module: continuum.hydra.slurm_gate_apply
"""

EXAMPLES = r"""
- name: Outcomes of this play's hosts from their registered doctor results
  ansible.builtin.debug:
    msg: "{{ hostvars | continuum.hydra.doctor_outcomes(ansible_play_hosts_all) }}"

- name: Outcomes from a saved fleet report
  ansible.builtin.debug:
    msg: "{{ lookup('ansible.builtin.file', 'reports/fleet-report.json') | from_json | continuum.hydra.doctor_outcomes }}"

- name: Doctor's verdicts alone, open interconnect findings left out
  ansible.builtin.debug:
    msg: "{{ lookup('ansible.builtin.file', 'reports/fleet-report.json') | from_json
             | continuum.hydra.doctor_outcomes(interconnect=false) }}"
"""

RETURN = r"""
_value:
  description: Host name to its outcome.
  type: dict
  sample: {"gpu-a": {"status": "failed", "failing_checks": ["gpu.ecc_errors"], "warning_checks": [],
                     "message": "doctor: failed"},
           "gpu-b": {"status": "failed", "failing_checks": ["fabric.collective"], "warning_checks": [],
                     "message": "doctor: failed", "proof": "rounds 1,2,4: 0.0025<0.02 GB/s with gpu-c"},
           "gpu-c": {"status": "failed", "failing_checks": ["interconnect.ib_errors"], "warning_checks": [],
                     "message": "doctor: healthy; interconnect: 1 open finding",
                     "proof": "mlx5_0 port 1: link_downed +2 since the last run (24.0 h)"}}
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.module_utils._status import (
    ALL_HOST_STATUSES,
    ERRORED,
    FAIL,
    FAILED,
    HEALTHY,
    HOST_VERDICTS,
    MISSING,
    TASK_FAILED,
    UNCHECKED,
    UNKNOWN,
    UNREACHABLE,
    WARN,
    WARNING,
)
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.interconnect import FINDING_IDS
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector, reported_checks

FLEET_REPORT_KIND = "continuum.hydra.fleet_report"
INTERCONNECT_IDS = frozenset(FINDING_IDS.values())


def _outcome(status: str, message: str, failing: Iterable[str] = (), warning: Iterable[str] = (),
             proof: Optional[str] = None) -> dict[str, Any]:
    outcome = {"status": status, "failing_checks": sorted(set(failing)), "warning_checks": sorted(set(warning)), "message": message}
    if proof:
        outcome["proof"] = proof
    return outcome


def _proof(entry: Mapping[str, Any]) -> Optional[str]:
    """The short proofs failing checks offer for a drain reason (details.proof), joined; None when none does."""
    proofs = [str(c["details"]["proof"]) for c in reported_checks(entry)
              if c.get("id") in (entry.get("failing_checks") or []) and isinstance(c.get("details"), Mapping) and c["details"].get("proof")]
    return "; ".join(proofs) or None


def from_fleet_report_host(entry: Mapping[str, Any], open_findings: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """One host of a fleet report, its open interconnect findings (_open_interconnect) joined (_with_interconnect)."""
    return _with_interconnect(_doctor_outcome(entry), open_findings)


def _doctor_outcome(entry: Mapping[str, Any]) -> dict[str, Any]:
    status = entry.get("status")
    if status == TASK_FAILED:
        return _outcome(ERRORED, "doctor task failed: %s" % (entry.get("message") or "no message"))
    if status in (UNCHECKED, MISSING):
        # Profiled but never judged by doctor, or in no slice of a merged report: nothing to drain or resume it on.
        return _outcome(UNKNOWN, entry.get("message") or "doctor did not check this host")
    if status not in HOST_VERDICTS + (UNREACHABLE,):
        raise AnsibleFilterError("doctor_outcomes: fleet report host status %r is not one of %s"
                                 % (status, ", ".join(ALL_HOST_STATUSES)))
    return _outcome(status, entry.get("message") or "doctor: %s" % status,
                    failing=entry.get("failing_checks") or [], warning=entry.get("warning_checks") or [], proof=_proof(entry))


def _with_interconnect(outcome: dict[str, Any], open_findings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """An open interconnect FAIL makes any judged or unjudged host failed (a doctor run that errs or did not reach it
    this time does not make a downed link good); an open WARN only turns healthy into warning (never unknown into
    warning: the gate could then resume a node nobody checked). An unreachable host is left to the gate's unreachable
    policy, whatever its links did before."""
    failing = [f for f in open_findings if f.get("status") == FAIL]
    warning = [f for f in open_findings if f.get("status") == WARN]
    if outcome["status"] == UNREACHABLE or not (failing or warning):
        return outcome
    if failing:
        outcome["status"] = FAILED
        proofs = [outcome.get("proof")] + ["%s: %s" % (f.get("subject"), f.get("message")) for f in failing]
        outcome["proof"] = "; ".join(p for p in proofs if p)
    elif outcome["status"] == HEALTHY:
        outcome["status"] = WARNING
    outcome["failing_checks"] = sorted(set(outcome["failing_checks"]) | set(f["check_id"] for f in failing))
    outcome["warning_checks"] = sorted(set(outcome["warning_checks"]) | set(f["check_id"] for f in warning))
    count = len(failing) + len(warning)
    outcome["message"] = "%s; interconnect: %d open finding%s" % (outcome["message"], count, "" if count == 1 else "s")
    return outcome


def _open_interconnect(report: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """{host: its open interconnect findings} of a fleet report's findings store: rates, flaps, ports against their
    peers and NVLink domains, judged across runs and hosts (_fleet/interconnect.py), open until cleared or acknowledged."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for found in report.get("findings") or []:
        if isinstance(found, Mapping) and found.get("open") and found.get("check_id") in INTERCONNECT_IDS:
            out.setdefault(str(found.get("host")), []).append(found)
    return out


def doctor_outcomes(source: Any, hosts: Optional[Iterable[str]] = None, result_var: str = "hydra_doctor",
                    fabric_var: str = "hydra_fabric_plan", interconnect: bool = True) -> dict[str, dict[str, Any]]:
    if hosts is not None and (isinstance(hosts, (str, bytes)) or not hasattr(hosts, "__iter__")):
        raise AnsibleFilterError("doctor_outcomes: hosts must be a list of host names, got %r" % (hosts,))
    if not isinstance(interconnect, bool):
        raise AnsibleFilterError("doctor_outcomes: interconnect must be true or false, got %r" % (interconnect,))
    if isinstance(source, dict) and source.get("kind") == FLEET_REPORT_KIND:
        report_hosts = source.get("hosts") or {}
        names = list(hosts) if hosts is not None else sorted(report_hosts)
        open_by_host = _open_interconnect(source) if interconnect else {}
        return dict((name, from_fleet_report_host(report_hosts[name], open_by_host.get(name, ())) if name in report_hosts
                     else _outcome(UNKNOWN, "not in the fleet report")) for name in names)
    if hosts is None:
        raise AnsibleFilterError("doctor_outcomes: give the hosts to report on (hostvars | doctor_outcomes(hosts)), "
                                 "or pass a fleet report (its 'kind' is %s)" % FLEET_REPORT_KIND)
    # Registered results go through the fleet report's own reading of them: one rule for both inputs.
    hosts = list(hosts)
    try:
        collector = FleetCollector.from_hostvars(source, hosts, result_var)
    except TypeError as exc:
        raise AnsibleFilterError("doctor_outcomes: %s" % exc) from exc
    fabric = _fabric_verdict(source, hosts, fabric_var)
    if fabric is not None:
        collector.add_fabric(fabric["fabric"], fabric.get("checks") or {})
    report_hosts = collector.build(None)["hosts"]
    return dict((name, from_fleet_report_host(report_hosts[name])) for name in hosts)


def _fabric_verdict(source: Any, hosts: Iterable[str], fabric_var: str) -> Optional[Mapping[str, Any]]:
    """The fabric test's finished planner result (run_once: the same on every host), if any host holds one."""
    for name in hosts:
        value = source[name].get(fabric_var) if name in source else None
        if isinstance(value, Mapping) and value.get("done") and isinstance(value.get("fabric"), Mapping):
            return value
    return None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"doctor_outcomes": doctor_outcomes}
