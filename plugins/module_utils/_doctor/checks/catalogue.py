# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The doctor check catalogue, in report order.

Importing the check modules registers their checks; the import order is the
order checks appear in a result.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import (
    active,
    amd,
    configuration,
    dcgm,
    driver,
    fabric,
    health,
    healthcheck,
    interconnect,
    performance,
    registry,
    rvs,
    stack,
    system,
    tenant,
    topology,
    xid,
)

# The published order of the catalogue (docs/checks.md, results): the software stack, then GPUs, then the system.
CATALOGUE = [chk for module in (stack, driver, configuration, health, xid, performance, fabric, amd, topology, dcgm, rvs, active, system,
                                interconnect, healthcheck, tenant)
             for chk in registry.registered() if chk.func.__module__ == module.__name__]

# Root causes: probe name -> the check that exists to report that probe's failure (its root check). When the probe
# fails, that check is the one ERROR with the reason; the other checks that require the probe are SKIP with
# ``blocked_by`` naming it (registry.evaluate, registry.blocked). A probe not listed here has no root: the checks
# that require it are ERROR each.
PROBE_ROOTS = {
    "nvidia_smi": "driver.nvidia_smi",  # nvidia-smi fails or hangs: the 20-odd GPU checks that need its data wait on it
    "torch": "pytorch.installed",  # the torch interpreter hangs or crashes: every check of the torch build waits on it
    "nvml": "gpu.nvml_available",  # NVML cannot be loaded: gpu.nvml_devices waits on it
    "amd_smi": "driver.amd_smi",  # amd-smi (or rocm-smi) fails or hangs: the AMD GPU checks wait on it
}


def _check_roots() -> None:
    """Each root is a catalogue check that reads its probe: a typo or a renamed check must fail at import."""
    reads = dict((chk.id, chk.probes) for chk in CATALOGUE)
    for probe, root in PROBE_ROOTS.items():
        if probe not in reads.get(root, ()):
            raise ValueError("PROBE_ROOTS: %s is not a check that reads probe %s" % (root, probe))


_check_roots()
