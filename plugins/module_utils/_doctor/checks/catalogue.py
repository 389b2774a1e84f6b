# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The doctor check catalogue, in report order.

Importing the check modules registers their checks; the import order is the
order checks appear in a result.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import gpu, registry, stack, system

# The published order of the catalogue (docs/checks.md, results): the software stack, then GPUs, then the system.
CATALOGUE = [chk for module in (stack, gpu, system) for chk in registry.registered() if chk.func.__module__ == module.__name__]
