# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The host result schema shared by doctor, the callback and the fleet report.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

SCHEMA_VERSION = "1.1.0"

PASS = "PASS"
WARN = "WARN"
FAIL = "FAIL"
SKIP = "SKIP"
ERROR = "ERROR"
STATUSES = (PASS, WARN, FAIL, SKIP, ERROR)

# Severity orders statuses for "worst of" decisions; SKIP says nothing about health.
SEVERITY = {PASS: 0, SKIP: 0, WARN: 1, ERROR: 2, FAIL: 3}

# A host's verdict from its checks, in order of concern; the fleet report and the SLURM gate share them.
HEALTHY = "healthy"
WARNING = "warning"
FAILED = "failed"
ERRORED = "error"
HOST_VERDICTS = (HEALTHY, WARNING, ERRORED, FAILED)
UNREACHABLE = "unreachable"  # no verdict: Ansible could not reach the host


def finding(status, message, details=None, remediation=None):
    """What a check function returns: a verdict with its evidence."""
    if status not in STATUSES:
        raise ValueError("status %r is not one of %s" % (status, ", ".join(STATUSES)))
    return {"status": status, "message": message, "details": details or {}, "remediation": remediation}


def worst(statuses):
    """The most severe status of an iterable (PASS when empty)."""
    result = PASS
    for status in statuses:
        if SEVERITY[status] > SEVERITY[result]:
            result = status
    return result


def summarize(checks):
    """Counts per status, every status present (0 when absent)."""
    counts = dict((status, 0) for status in STATUSES)
    for check in checks:
        counts[check["status"]] += 1
    return counts


def overall_status(summary):
    """Host verdict: a FAIL beats an ERROR beats a WARN."""
    if summary.get(FAIL):
        return FAILED
    if summary.get(ERROR):
        return ERRORED
    if summary.get(WARN):
        return WARNING
    return HEALTHY


def gpu_ref(gpu):
    """How every per-GPU finding names its GPU."""
    return {"index": gpu.get("index"), "pci_bus_id": gpu.get("pci_bus_id"), "uuid": gpu.get("uuid"), "name": gpu.get("name")}
