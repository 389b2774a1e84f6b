# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one status vocabulary: check statuses in severity order, host verdicts and statuses, and every other outcome
word (what reading produced, a benchmark, a workload run, a fabric rank and group, the gate's unknown).

Statuses and verdicts stay plain strings on the wire (module JSON, Jinja, YAML, reports); what they mean and how
they order lives here and nowhere else (tests/unit/test_layout.py fails on a status word spelt out elsewhere).

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

# A host's status in the fleet report: its verdict, or one of these when doctor gave none.
TASK_FAILED = "task_failed"  # doctor's task failed on the host: no verdict
UNCHECKED = "unchecked"  # profiled or set up, but doctor did not run: nothing says whether the host is healthy
MISSING = "missing"  # in the inventory of a merged run (playbooks/merge.yml) but in no slice's part: never checked
HOST_STATUSES = HOST_VERDICTS + (UNREACHABLE, TASK_FAILED)
OPTIONAL_STATUSES = (UNCHECKED, MISSING)  # in the totals only when some host has it, so doctor runs keep their totals
ALL_HOST_STATUSES = HOST_STATUSES + OPTIONAL_STATUSES
NOT_JUDGED = (UNREACHABLE, TASK_FAILED, MISSING)  # hosts doctor could not judge at all: no checks ran
NOT_SCREENED = "not_screened"  # screening coverage: a try whose job never ran (node busy, drained); not screened
# A host outcome with no doctor verdict to act on (profiled only, not in the report): the gate neither drains nor
# resumes it.
UNKNOWN = "unknown"

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


# A benchmark's outcome (profile): the "status" of its result; the profile's STATUS_OF maps it to a check status.
BENCH_OK = "ok"
BENCH_FALLBACK = "fallback"  # measured, but with a lower-fidelity method (labelled in "method")
BENCH_SKIPPED = "skipped"
BENCH_FAILED = "error"

# A workload run's outcome: madengine's run statuses (not doctor's check statuses); TIMEOUT is hydra's, madengine
# reports FAILURE.
RUN_SUCCESS = "SUCCESS"
RUN_FAILURE = "FAILURE"
RUN_SKIPPED = "SKIPPED"
RUN_TIMEOUT = "TIMEOUT"
RUN_STATUSES = (RUN_SUCCESS, RUN_FAILURE, RUN_SKIPPED, RUN_TIMEOUT)

# A fabric test rank's outcome (_fabric/rank.py), judged on the controller (_fleet/fabric.py).
RANK_OK = "ok"
RANK_NOT_JOINED = "not_joined"
RANK_PEER_LOST = "peer_lost"
RANK_BROKEN = "broken"

# A fabric test group's verdict in a round (_fleet/fabric.py), drawn and named by _render/_fabric.py.
GROUP_PASSED = "pass"
GROUP_BELOW = "below"  # below its floor, or a rank's result was not exact
GROUP_INCOMPLETE = "incomplete"  # a rank did not join, was lost or broke: no figure
GROUP_UNJUDGED = "unjudged"  # a figure, but no floor to judge it by yet
