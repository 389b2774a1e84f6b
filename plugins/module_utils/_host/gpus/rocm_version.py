# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The installed ROCm release: the first line of /opt/rocm/.info/version (ROCm's packages write it, e.g. "6.2.4-120").

Fleet drift compares it per hardware class, as the CUDA driver version is compared on NVIDIA hosts.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
from typing import Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none

VERSION_FILES = ("opt/rocm/.info/version", "opt/rocm/.info/version-dev")
READ_TIMEOUT_S = 2.0


def read_rocm_version(root: str = "/") -> Optional[str]:
    """The ROCm version text, None where ROCm is not installed or the file says nothing."""
    for name in VERSION_FILES:
        # Missing, unreadable or hanging past the deadline: no version rather than a failed doctor run.
        content = read_text_or_none(os.path.join(root, name), READ_TIMEOUT_S)
        lines = (content or "").strip().splitlines()
        if lines and lines[0].strip():
            return lines[0].strip()
    return None
