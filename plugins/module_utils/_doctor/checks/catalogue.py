# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The doctor check catalogue, in report order.

Importing the check modules registers their checks; the import order is the
order checks appear in a result.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import stack  # noqa: F401 pylint: disable=unused-import
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import gpu  # noqa: F401 pylint: disable=unused-import
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import system  # noqa: F401 pylint: disable=unused-import

CATALOGUE = registry.registered()
