# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""cgroup limit files read one way, v1 and v2: for the doctor's cgroup probe and for cgroup remediation.

v2 writes "max" where there is no limit; v1 writes -1 (cpu.cfs_quota_us) or the largest page-aligned 64-bit value
(memory.limit_in_bytes: 9223372036854771712 with 4 KiB pages, other values with other page sizes).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from typing import Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_if_exists

# v1's "no limit" is LONG_MAX rounded down to a page; no real limit comes near, so anything this big is none.
V1_UNLIMITED = 1 << 62


def parse_limit(text: str) -> Optional[int]:
    """A cgroup limit value (bytes, microseconds) -> the number; None for no limit ("max", -1, from 2**62 up).

    ValueError naming the text for anything else.
    """
    value = text.strip()
    if value in ("max", "-1"):
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError("%r is neither 'max' nor a number" % value[:80]) from None
    return None if number >= V1_UNLIMITED else number


def read_limit(path: str) -> Optional[int]:
    """A cgroup limit file (memory.max, memory.limit_in_bytes, cpu.cfs_quota_us): its number, None for no limit or
    no such file; ProbeError naming the file when it cannot be read or holds anything else."""
    text = read_text_if_exists(path)
    if text is None:
        return None
    try:
        return parse_limit(text)
    except ValueError as exc:
        raise ProbeError("%s: %s" % (path, exc)) from None
