# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Line-oriented text read line by line, where one line that cannot be read is skipped and counted, never fatal.

A kernel log, ``nvidia-smi topo -m``, ``nvidia-smi nvlink --status``, rvs output, /proc files: one malformed line
(an impossible date, a 5,000-digit number, a UTC offset beyond a day, a field missing) must neither hide the rest
of the text (a fatal Xid beside it) nor become a healthy reading. parse_lines() hands each line to the format's
line parser, leaves out each line the parser cannot read and counts it in a BadLines record; the probe puts
``BadLines.as_dict()`` in its data as ``bad_lines`` and its check names them.

A line parser returns the line's value, None for a line that is not of its format (not an error), or raises one
of LINE_ERRORS for a line of its format it cannot read (BadLine when it finds that itself).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterator
from typing import Any, Callable, Optional, TypeVar

# What reading one line can raise: int() of more than 4,300 digits, datetime(2026, 13, 1), a timezone of +99:00
# and float("1.2.3") raise ValueError (so does BadLine), timedelta(days=10**10) OverflowError, a missing field
# IndexError or KeyError.
LINE_ERRORS = (ValueError, OverflowError, LookupError)

# How many bad lines are kept as examples; the count covers all of them.
SAMPLE = 3
# How much of a bad line an example keeps.
EXCERPT = 120

T = TypeVar("T")


class BadLine(ValueError):
    """A line of the parser's format that it cannot read; the message says what is wrong with it."""


class BadLines:
    """The lines that could not be read: how many, and the first SAMPLE (line number, why, excerpt; the source
    where several texts are counted together).

    A line counts once however many parsers fail on it (scan() passes read the same text several times).
    """

    def __init__(self) -> None:
        self.count = 0
        self.sample: list[dict[str, Any]] = []
        self._seen: set[tuple[Optional[str], int]] = set()

    def add(self, number: int, line: str, error: BaseException, source: Optional[str] = None) -> None:
        if (source, number) in self._seen:
            return
        self._seen.add((source, number))
        self.count += 1
        if len(self.sample) < SAMPLE:
            why = str(error) or type(error).__name__
            text = line.strip()
            item = {"line": number, "error": why[:EXCERPT], "text": text if len(text) <= EXCERPT else text[:EXCERPT] + "..."}
            if source:
                item["source"] = source
            self.sample.append(item)

    def __bool__(self) -> bool:
        return self.count > 0

    def as_dict(self) -> dict[str, Any]:
        """{count, sample: [{line, error, text}]}: what a probe's data carries as ``bad_lines``."""
        return {"count": self.count, "sample": [dict(item) for item in self.sample]}


def parse_lines(text: Optional[str], parse: Callable[[str], Optional[T]], bad: BadLines,
                lines: Optional[list[str]] = None, source: Optional[str] = None) -> Iterator[tuple[int, str, T]]:
    """(line number from 1, line, parse(line)) for each line of text whose parse gives a value (not None).

    A line where parse raises one of LINE_ERRORS is counted in ``bad`` and left out; the rest are read. ``lines``:
    the text already split (the same numbering), for parsers that cleaned the lines first; ``source``: which text
    (a file name) when one BadLines counts several.
    """
    for number, line in enumerate((text or "").splitlines() if lines is None else lines, 1):
        try:
            value = parse(line)
        except LINE_ERRORS as exc:
            bad.add(number, line, exc, source)
            continue
        if value is not None:
            yield number, line, value


def describe(bad: Optional[dict[str, Any]], what: str = "line") -> Optional[str]:
    """'2 unreadable lines skipped (line 7: month must be in 1..12)' for a ``bad_lines`` dict; None when none."""
    if not bad or not bad.get("count"):
        return None
    first = (bad.get("sample") or [{}])[0]
    where = " (line %s%s: %s)" % (first["line"], " of %s" % first["source"] if first.get("source") else "",
                                  first["error"]) if first else ""
    return "%d unreadable %s%s skipped%s" % (bad["count"], what, "" if bad["count"] == 1 else "s", where)
