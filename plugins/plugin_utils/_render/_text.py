# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Text helpers every renderer shares: control characters out of fleet strings, plurals, an error in one line.

Host names, GPU names and messages come from the fleet. Their control characters (C0, DEL and C1) must
not reach a report raw: an ESC recolours a terminal, a BEL or NUL makes XML unparseable, a C1 character
is read as a control sequence by some terminals. printable() replaces each with U+FFFD, keeping only the
whitespace the format can carry (``keep``, tab and newline by default); escaped_controls() writes them
as Python escapes (``\\x1b``) for the terminal, where the reader wants to see what was there.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import functools
import re
from typing import Optional

from ansible.module_utils.common.text.converters import to_native

REPLACEMENT = "\ufffd"
_CONTROLS = "\x00-\x1f\x7f-\x9f"
_ALL = re.compile("[%s]" % _CONTROLS)


@functools.lru_cache(maxsize=64)
def _pattern(keep: str) -> "re.Pattern[str]":
    if not keep:
        return _ALL
    return re.compile("(?![%s])[%s]" % (re.escape(keep), _CONTROLS))


def printable(value: object, keep: str = "\t\n") -> str:
    """str(value) with every control character except those in ``keep`` replaced by U+FFFD (None: "")."""
    text = "" if value is None else str(value)
    return _pattern(keep).sub(REPLACEMENT, text)


def escaped_controls(text: str) -> str:
    """Every control character written as its Python escape (``\\x07``, ``\\n``), for the terminal."""
    return _ALL.sub(lambda m: repr(m.group(0))[1:-1], text)


def plural(count: int, word: str, words: Optional[str] = None) -> str:
    """"1 host", "2 hosts" (``words`` when the plural is not word + "s")."""
    return "%d %s" % (count, word if count == 1 else (words or word + "s"))


def one_line(exc: BaseException) -> str:
    """An error's text on one line, for a warning or a report's problem line."""
    return " ".join(to_native(exc).split())
