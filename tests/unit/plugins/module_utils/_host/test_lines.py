"""The one "parse lines, skip and count the bad ones" helper, on lines of a real kernel log recording."""

import datetime

from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import SAMPLE, BadLine, BadLines, describe, parse_lines
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture


def stamp(line):
    """A line parser: the ISO date a dmesg line starts with (raises on an impossible one), None for other lines."""
    if not line[:4].isdigit():
        return None
    if line[4] != "-":
        raise BadLine("no date")
    return datetime.date(int(line[:4]), int(line[5:7]), int(line[8:10]))


def test_a_bad_line_is_skipped_and_counted_and_every_other_line_is_read():
    lines = read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt").splitlines()
    lines[3] = lines[3].replace("2026-11-22", "2026-13-22", 1)
    lines.insert(6, "not a kernel line")
    bad = BadLines()
    read = list(parse_lines("\n".join(lines), stamp, bad))
    assert len(read) == len(lines) - 2 and [number for number, _l, _v in read][:4] == [1, 2, 3, 5]
    assert bad.as_dict() == {"count": 1, "sample": [{"line": 4, "error": "month must be in 1..12", "text": lines[3]}]}
    assert describe(bad.as_dict()) == "1 unreadable line skipped (line 4: month must be in 1..12)"


def test_each_bad_line_counts_once_and_only_a_sample_is_kept():
    bad = BadLines()
    text = "\n".join(["2026-02-30 a", "12345 b", "9" * 5000 + "-01-01 c", "2026-01-01 d"] * 3)
    values = [v for _n, _l, v in parse_lines(text, stamp, bad)]
    list(parse_lines(text, stamp, bad))  # a second pass over the same text counts nothing twice
    assert values == [datetime.date(2026, 1, 1)] * 3
    assert bad.count == 9 and len(bad.sample) == SAMPLE
    assert [s["error"] for s in bad.sample] == ["day is out of range for month", "no date", "no date"]
    assert bad.sample[2]["text"].endswith("...") and len(bad.sample[2]["text"]) == 123
    assert describe({"count": 0, "sample": []}) is None and describe(None) is None
