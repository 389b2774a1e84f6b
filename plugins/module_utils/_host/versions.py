# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Version strings as tools print them ("535.104.05", "12.4", "2.5.1+cu124", "v1.2"), parsed and compared.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from typing import Any, Optional

_LEADING = re.compile(r"^(\d+(?:\.\d+)*)")
_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)")
_DOTTED = re.compile(r"^\d+(\.\d+)*$")


def version_tuple(text: Any) -> Optional[tuple[int, ...]]:
    """"12.4" / "2.5.1+cu124" -> (12, 4) / (2, 5, 1); None when there is no leading number."""
    match = _LEADING.match(str(text or ""))
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def major_version(text: Any) -> Optional[int]:
    """The first component of a version ("535.104.05" -> 535), None when there is none."""
    parsed = version_tuple(text)
    return parsed[0] if parsed else None


def matches_prefix(version: Any, prefix: Any) -> bool:
    """Whether version "2.5.1+cu124" is of release line "2.5" (whole components, not characters)."""
    have, want = version_tuple(version), version_tuple(prefix)
    return have is not None and want is not None and have[:len(want)] == want


def release(version: Optional[str]) -> Optional[tuple[int, ...]]:
    """The numeric release of a version ("2.13.0+cpu" -> (2, 13); "v1.2" -> (1, 2)), trailing zeros dropped.

    Two spellings of one release compare equal ("2.0" and "2"); None when the text has no numeric release.
    """
    match = _RELEASE.match(version or "")
    if not match:
        return None
    parts = [int(part) for part in match.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def dotted(text: Optional[str]) -> Optional[tuple[int, ...]]:
    """The whole text as a dotted version ("535.104.05" -> (535, 104, 5)); None for anything else ("535.x", "")."""
    text = (text or "").strip()
    return tuple(int(part) for part in text.split(".")) if _DOTTED.match(text) else None


def compare(left: tuple[int, ...], right: tuple[int, ...]) -> int:
    """-1, 0 or 1 as version left is older than, the same release as, or newer than right.

    Missing components count as 0 ((12,) == (12, 0), (535, 104) < (535, 104, 5)).
    """
    width = max(len(left), len(right))
    left, right = left + (0,) * (width - len(left)), right + (0,) * (width - len(right))
    return (left > right) - (left < right)
