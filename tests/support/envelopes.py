"""Probe envelopes as probes/catalogue.collect() wraps a probe's outcome, for tests that hand checks their data."""

from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_ABSENT, READ_FAILED, READ_OK


def ok(data):
    """A probe that ran and read ``data``."""
    return {"status": READ_OK, "data": data, "reason": None, "duration_ms": 0.0}


def absent(reason):
    """A probe whose source is not on the host."""
    return {"status": READ_ABSENT, "data": None, "reason": reason, "duration_ms": 0.0}


def error(reason):
    """A probe that failed to read."""
    return {"status": READ_FAILED, "data": None, "reason": reason, "duration_ms": 0.0}
