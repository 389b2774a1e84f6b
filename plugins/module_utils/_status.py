# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one status vocabulary: check statuses in severity order, and host verdicts.

Statuses and verdicts stay plain strings on the wire (module JSON, Jinja, YAML, reports); what they mean and how
they order lives here and nowhere else.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Mapping

# A check's status.
PASS = "PASS"
WARN = "WARN"
FAIL = "FAIL"
SKIP = "SKIP"
ERROR = "ERROR"
STATUSES = (PASS, WARN, FAIL, SKIP, ERROR)  # the published order (summaries, columns)

# Severity orders statuses for "worst of" decisions; SKIP says nothing about health.
SEVERITY = {PASS: 0, SKIP: 0, WARN: 1, ERROR: 2, FAIL: 3}
PROBLEMS = (FAIL, ERROR, WARN)  # statuses that need someone's attention, worst first

# A host's verdict from its checks, in order of concern.
HEALTHY = "healthy"
WARNING = "warning"
ERRORED = "error"
FAILED = "failed"
HOST_VERDICTS = (HEALTHY, WARNING, ERRORED, FAILED)
UNREACHABLE = "unreachable"  # no verdict: Ansible could not reach the host

# The verdict a host gets from its worst check.
_VERDICT_OF_WORST = {PASS: HEALTHY, SKIP: HEALTHY, WARN: WARNING, ERROR: ERRORED, FAIL: FAILED}


def is_status(value: object) -> bool:
    return isinstance(value, str) and value in SEVERITY


def severity(status: str) -> int:
    """How bad a status is: 0 (PASS, SKIP) to 3 (FAIL)."""
    return SEVERITY[status]


def worst(statuses: Iterable[str]) -> str:
    """The most severe status of an iterable (PASS when empty)."""
    result = PASS
    for status in statuses:
        if SEVERITY[status] > SEVERITY[result]:
            result = status
    return result


def worst_first(statuses: Iterable[str]) -> list[str]:
    """Statuses sorted most severe first (stable for equal severity)."""
    return sorted(statuses, key=lambda status: -SEVERITY[status])


def host_verdict(summary: Mapping[str, int]) -> str:
    """A host's verdict from its per-status counts: a FAIL beats an ERROR beats a WARN."""
    return _VERDICT_OF_WORST[worst(status for status in STATUSES if summary.get(status))]


# A module's fail_on option: which host verdicts fail the Ansible task.
FAIL_ON_NEVER = "never"
FAIL_ON_FAIL = "fail"  # failed or error
FAIL_ON_WARN = "warn"  # anything but healthy
FAIL_ON = (FAIL_ON_NEVER, FAIL_ON_FAIL, FAIL_ON_WARN)


def fails_task(verdict: str, fail_on: str) -> bool:
    """fail_on=never|fail|warn: whether a host with this verdict fails its Ansible task."""
    if fail_on == FAIL_ON_FAIL:
        return verdict in (FAILED, ERRORED)
    if fail_on == FAIL_ON_WARN:
        return verdict != HEALTHY
    return False


# What reading something produced (a doctor probe's envelope, profile's torch inventory): not a health status.
READ_OK = "ok"
READ_ABSENT = "absent"  # nothing there to read on this host: the checks that need it SKIP
READ_FAILED = "error"  # there, but unreadable or timed out: the checks that need it ERROR, never PASS
