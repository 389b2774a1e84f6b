# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the node-local SLURM health check (hydra-healthcheck) last judged, for doctor and the fleet report.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, WARN

MAX_AGE_HOURS = _expect.key("healthcheck_max_age_hours")


def age_text(seconds: Optional[float]) -> str:
    if seconds is None:
        return "at an unknown time"
    if seconds < 120:
        return "%d s ago" % max(0, round(seconds))
    if seconds < 7200:
        return "%d min ago" % round(seconds / 60)
    return "%.1f h ago" % (seconds / 3600)


@check("slurm.healthcheck", "node-local health check's last verdict", requires=("healthcheck_last",))
def healthcheck_last(probes: Probes, expect: Expect) -> Finding:
    """Reads the last result the node-local health check (hydra-healthcheck, role slurm_healthcheck) wrote (last.json).

    FAIL when it last judged the node unhealthy (exit 1) within `healthcheck_max_age_hours` (default 24);
    WARN when that FAIL is older, when it could not judge (exit 2), or when its last result, healthy or not, is
    older than `healthcheck_max_age_hours` or has no readable time (is the program still run?); PASS when it
    judged the node healthy within that age. SKIP where the program never ran (no last.json).
    Remediation: read the failing checks in last.json and fix the node; the slurm_gate role resumes a node hydra drained.
    """
    last = probes["healthcheck_last"]["data"]
    max_age_s = float(_expect.get(expect, MAX_AGE_HOURS)) * 3600.0
    age = last["read_at_epoch"] - last["at_epoch"] if last.get("at_epoch") is not None else None
    details: dict[str, Any] = dict(last, age_s=age, max_age_s=max_age_s)
    when = age_text(age)
    fresh = age is not None and age <= max_age_s
    if last["exit_code"] == 1:
        what = "the node-local health check judged the node unhealthy %s (%s)" % (
            when, last.get("reason") or ", ".join(str(i) for i in last["failing"]) or "no failing check named")
        remediation = "fix what the failing checks report (%s); slurm_gate resumes a node hydra drained" % (
            last.get("path"))
        if fresh:
            return finding(FAIL, what, details, remediation=remediation)
        return finding(WARN, what + "; that verdict is older than %g h" % (max_age_s / 3600), details, remediation=remediation)
    if last["exit_code"] == 2:
        return finding(WARN, "the node-local health check could not judge the node %s (ERROR: %s)"
                       % (when, ", ".join(str(i) for i in last["erroring"]) or "no check named"), details,
                       remediation="read %s for the checks that could not run" % last.get("path"))
    if not fresh:
        return finding(WARN, "the node-local health check last ran %s, longer than %g h: is it still run "
                       "(HealthCheckInterval, Prolog)?" % (when, max_age_s / 3600), details,
                       remediation="check slurm.conf HealthCheckProgram/HealthCheckInterval and slurmd's log")
    return finding(PASS, "the node-local health check judged the node healthy %s" % when, details)
