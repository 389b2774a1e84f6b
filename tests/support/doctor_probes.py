"""A probe table for doctor runs in the tests: every probe absent but the host facts, then the test's own probes."""

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent


def probe_table(**overrides):
    """Every probe absent except the host facts, then the given overrides."""
    def absent(options):
        raise ProbeAbsent("not on this test host")
    table = dict((name, absent) for name in probe_catalogue.PROBES)
    table["host"] = lambda options: {"hostname": "test-host"}
    table.update(overrides)
    return table
