# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""doctor's levels: how much a run may cost the host, in three words.

- ``quick``: prolog-safe. No load on the GPUs, one ``nvidia-smi -q -x`` call, cheap /proc and /sys reads; no
  subprocess besides nvidia-smi (no torch, no journalctl, no NVML session). Seconds.
- ``standard`` (the default): quick plus the kernel log, NVML, NVLink, Fabric Manager, time sync, nvcc and the
  PyTorch subprocess. Still passive: nothing is loaded onto a GPU.
- ``deep``: standard plus active checks that load the GPUs for minutes: DCGM's ``dcgmi diag`` and AMD's ``rvs``
  where installed, and hydra's own active checks.

A probe's cost decides the lowest level that may run it (probes/catalogue.PROBE_LEVELS); a check's level is the
highest level of the probes it reads, or the higher level it declares (``@check(..., level=DEEP)``). A run at a
level runs every check at or below it. The words are not statuses: they live here, not in _status.py.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable
from typing import Optional

QUICK = "quick"
STANDARD = "standard"
DEEP = "deep"
LEVELS = (QUICK, STANDARD, DEEP)  # cheapest first
DEFAULT = STANDARD

_RANK = dict((level, rank) for rank, level in enumerate(LEVELS))


def is_level(value: object) -> bool:
    return isinstance(value, str) and value in _RANK


def rank(level: str) -> int:
    """0 (quick) to 2 (deep); KeyError for a word that is not a level."""
    return _RANK[level]


def highest(levels: Iterable[Optional[str]]) -> str:
    """The costliest of the levels given (None entries ignored); quick when none is given."""
    found = [level for level in levels if level is not None]
    return max(found, key=rank) if found else QUICK


def within(level: str, run_level: str) -> bool:
    """Whether a check or probe at ``level`` runs in a run at ``run_level``."""
    return rank(level) <= rank(run_level)
