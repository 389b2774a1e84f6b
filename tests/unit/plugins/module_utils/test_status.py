"""The status vocabulary: severity order, worst-of, host verdicts and fail_on."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils import _status
from ansible_collections.continuum.hydra.plugins.module_utils._status import (
    ERROR,
    ERRORED,
    FAIL,
    FAILED,
    HEALTHY,
    PASS,
    SKIP,
    WARN,
    WARNING,
)


def test_statuses_are_the_published_words_in_the_published_order():
    assert _status.STATUSES == ("PASS", "WARN", "FAIL", "SKIP", "ERROR")
    assert _status.HOST_VERDICTS == ("healthy", "warning", "error", "failed")
    assert _status.UNREACHABLE == "unreachable" and _status.UNREACHABLE not in _status.HOST_VERDICTS
    assert (_status.READ_OK, _status.READ_ABSENT, _status.READ_FAILED) == ("ok", "absent", "error")


def test_severity_orders_fail_over_error_over_warn_over_pass_and_skip():
    assert [_status.severity(s) for s in (PASS, SKIP, WARN, ERROR, FAIL)] == [0, 0, 1, 2, 3]
    assert _status.PROBLEMS == (FAIL, ERROR, WARN)
    with pytest.raises(KeyError):
        _status.severity("pass")


def test_is_status():
    assert all(_status.is_status(s) for s in _status.STATUSES)
    assert not _status.is_status("pass") and not _status.is_status(None) and not _status.is_status(HEALTHY)


@pytest.mark.parametrize("statuses, expected", [
    ([], PASS),
    ([SKIP], PASS),
    ([PASS, SKIP], PASS),
    ([PASS, WARN, SKIP], WARN),
    ([WARN, ERROR, PASS], ERROR),
    ([ERROR, FAIL, WARN], FAIL),
    ([FAIL, ERROR], FAIL),
])
def test_worst(statuses, expected):
    assert _status.worst(statuses) == expected
    assert _status.worst(iter(statuses)) == expected


def test_worst_first_is_stable_for_equal_severity():
    assert _status.worst_first([PASS, WARN, SKIP, FAIL, ERROR, WARN]) == [FAIL, ERROR, WARN, WARN, PASS, SKIP]
    assert _status.worst_first([SKIP, PASS]) == [SKIP, PASS]


@pytest.mark.parametrize("summary, verdict", [
    ({}, HEALTHY),
    ({PASS: 30, SKIP: 8}, HEALTHY),
    ({PASS: 30, WARN: 0, FAIL: 0, SKIP: 8, ERROR: 0}, HEALTHY),
    ({PASS: 30, WARN: 2}, WARNING),
    ({PASS: 30, WARN: 2, ERROR: 1}, ERRORED),
    ({PASS: 30, WARN: 2, ERROR: 1, FAIL: 1}, FAILED),
    ({FAIL: 1}, FAILED),
])
def test_host_verdict_is_the_verdict_of_the_worst_counted_status(summary, verdict):
    assert _status.host_verdict(summary) == verdict


@pytest.mark.parametrize("verdict, never, on_fail, on_warn", [
    (HEALTHY, False, False, False),
    (WARNING, False, False, True),
    (ERRORED, False, True, True),
    (FAILED, False, True, True),
])
def test_fails_task(verdict, never, on_fail, on_warn):
    assert _status.FAIL_ON == ("never", "fail", "warn")
    assert _status.fails_task(verdict, _status.FAIL_ON_NEVER) is never
    assert _status.fails_task(verdict, _status.FAIL_ON_FAIL) is on_fail
    assert _status.fails_task(verdict, _status.FAIL_ON_WARN) is on_warn
