# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""hydra-tenant-guard's entry point: the __main__.py of the zipapp the tenant_guard role builds (_doctor/tenant_guard.py).

Doctor judges the tenants, _remediate's cgroup_limits lifecycle applies tier 1: a feature never imports another, so
the two meet here.
"""

import sys

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import tenant_guard
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply, cgroups

sys.exit(tenant_guard.main(sys.argv[1:], apply, cgroups.CgroupLimitsWorker))
