# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet report as JSON, streamed in pieces (schemas/fleet-report.schema.json describes it).

A 10,000-host report is hundreds of MB of text: it is written piece by piece (one host entry, one
analysis item at a time, each encoded by the fast C encoder) instead of being built as one string.
Keys are sorted; the top three levels, and any larger container, get one line per item; the rest is compact.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
from collections.abc import Iterator, Mapping
from typing import Any

STREAM_DEPTH = 3
STREAM_SIZE = 64


def _plain(value: object) -> object:
    """What the encoder cannot write itself: a mapping whose entries are made when read (history.SmoothedSeries) as
    the dict it reads as; anything else as its text."""
    return dict(value) if isinstance(value, Mapping) else str(value)


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_plain)


def _streamed(value: object, depth: int) -> bool:
    """Containers near the top, and any large one (per-host maps deep in the analysis), go out item by item."""
    return isinstance(value, (Mapping, list)) and bool(value) and (depth < STREAM_DEPTH or len(value) > STREAM_SIZE)


def _pieces(value: Any, depth: int) -> Iterator[str]:
    if _streamed(value, depth) and isinstance(value, Mapping):
        yield "{\n"
        for n, key in enumerate(sorted(value)):
            yield "%s%s: " % (",\n" if n else "", _ENCODER.encode(str(key)))
            yield from _pieces(value[key], depth + 1)
        yield "\n}"
    elif _streamed(value, depth):
        yield "[\n"
        for n, item in enumerate(value):
            if n:
                yield ",\n"
            yield from _pieces(item, depth + 1)
        yield "\n]"
    else:
        yield _ENCODER.encode(value)


def render(report: Mapping[str, Any]) -> Iterator[str]:
    """The report as JSON text, in pieces."""
    yield from _pieces(report, 0)
    yield "\n"
