# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet-level alarm on the checker itself (pure): the SLURM gate's circuit breaker, judged on the report's hosts.

When more than half the judged hosts could not be judged, or fail the same check (_remediate/slurm.breaker(), the
one rule the gate applies before it drains), the likelier culprit is the checker (a DCGM host engine down, an NFS
hang, a driver install broken across the fleet, an expectation no host meets). The report then carries one alarm,
ranked first among the actions, instead of a fault on every host.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._remediate.slurm import breaker
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, ERRORED, MISSING, TASK_FAILED, UNCHECKED, UNKNOWN

# The alarm's id among the report's actions: not a check of any host, the run's own.
ALARM_ID = "hydra.checker"
REMEDIATION = ("the checker, not the hosts, is the likelier culprit: look at what these hosts share (the DCGM host engine, "
               "a network mount, the driver install, the hydra_expect value the check reads) and rerun before trusting these "
               "verdicts; slurm_gate drains nothing while this holds")


def _outcome(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A report host as the gate's outcome (the doctor_outcomes filter's reading): task_failed could not be judged,
    unchecked and missing had no doctor run."""
    status = entry.get("status")
    if status == TASK_FAILED:
        status = ERRORED
    elif status in (UNCHECKED, MISSING):
        status = UNKNOWN
    return {"status": status, "failing_checks": list(entry.get("failing_checks") or [])}


def checker_alarm(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """breaker() of the report's hosts, with the gate's default share; when tripped, ``action``: the report's alarm."""
    found = breaker(dict((host, _outcome(entry)) for host, entry in hosts.items()))
    if found["tripped"]:
        found["action"] = {"check_id": ALARM_ID, "status": ERROR, "remediation": "%s: %s" % (found["why"], REMEDIATION),
                           "hosts": list(found["hosts"]), "host_count": len(found["hosts"])}
    return found


def raise_alarm(report: dict[str, Any]) -> None:
    """Put the checker alarm in ``analysis.checker``, and when it holds, one problem line and the first action."""
    alarm = checker_alarm(report["hosts"])
    action = alarm.pop("action", None)
    report["analysis"]["checker"] = alarm
    if action is not None:
        report["analysis"]["problems"].append("checker alarm: %s" % alarm["why"])
        report["actions"].insert(0, action)
