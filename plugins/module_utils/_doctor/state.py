# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Where doctor's node-local state lives: one directory (doctor's ``state_dir`` option), one file per feature.

``<state_dir>/tenants.json`` is check tenant.slo's (tenants.py); ``<state_dir>/healthcheck/last.json`` is the last
result of hydra-healthcheck (healthcheck.py, the slurm_healthcheck role's ``slurm_healthcheck_state_dir``), which
check slurm.healthcheck reads (probes/healthcheck.py). The doctor module's argspec repeats DEFAULT_STATE_DIR as its
``state_dir`` default (a test compares them).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
from typing import Optional

DEFAULT_STATE_DIR = "/var/lib/continuum-hydra"
HEALTHCHECK_SUBDIR = "healthcheck"
HEALTHCHECK_LAST = "last.json"


def healthcheck_last(state_dir: Optional[str]) -> str:
    """The health check's last result under ``state_dir`` (DEFAULT_STATE_DIR when None or empty)."""
    return os.path.join(state_dir or DEFAULT_STATE_DIR, HEALTHCHECK_SUBDIR, HEALTHCHECK_LAST)
