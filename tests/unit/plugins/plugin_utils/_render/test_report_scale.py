"""The report at 1,000 and 10,000 hosts (issue 29): one fleet-wide warning, a few per cent of other warnings, rare faults
(tests/support/ops_fleet.py scale_report, built through the production functions, findings folded over three runs).

Sizes are deterministic, so they are asserted: the HTML page under 3 MB at 10,000 hosts, the Markdown under 60 KB (a
ticket or a chat paste), the terminal summary under 40 lines. The time to open the page in Chromium is a benchmark
(benchmarks/report_scale.py), not a test. Every format is searched for what must never reach a reader: "None", "nan",
a raw Python repr."""

import re

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import formats, html, markdown, terminal
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import hostile_report
from ansible_collections.continuum.hydra.tests.support.ops_fleet import scale_report, seven_hosts

HTML_LIMIT = 3 * 1000 * 1000
MARKDOWN_LIMIT = 60 * 1000
# Words and shapes of Python's own str() and repr() that no reader should see: None, float('nan') and infinities,
# a dict, list or tuple of strings printed whole, an object's default repr.
LEAKS = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|-?\binf\b|\{'|\['|\('|<[\w.]+ object at 0x|\bdict_(?:keys|values|items)\(")
OVERLAP = 64  # a leak across two streamed pieces is still found
# A literal that each leak above contains: a chunk without one has no leak. Looking for these is about 20 times
# quicker than the whole pattern over the 90 MB of JSON of 10,000 hosts.
CANDIDATES = re.compile(r"None|nan|NaN|inf|\{'|\['|\('| object at 0x|dict_")
CHUNK = 1 << 16


@pytest.fixture(scope="module", params=[1000, 10000], ids=["1k", "10k"])
def scaled(request):
    report = scale_report(request.param)
    return request.param, report


def _size(render, report):
    return sum(len(piece.encode("utf-8")) for piece in render(report))


def _chunks(pieces):
    """The stream of text pieces as chunks of about CHUNK characters."""
    held, size = [], 0
    for piece in pieces:
        held.append(piece)
        size += len(piece)
        if size >= CHUNK:
            yield "".join(held)
            held, size = [], 0
    yield "".join(held)


def _leaks(pieces):
    """Each leak in a stream of text pieces, with its context, without joining the stream (10,000 hosts of JSON)."""
    found, tail = [], ""
    for chunk in _chunks(pieces):
        text = tail + chunk
        if CANDIDATES.search(text):
            found.extend(text[max(0, m.start() - 60):m.end() + 20] for m in LEAKS.finditer(text) if m.end() > len(tail))
        tail = text[-OVERLAP:]
    return found


def test_sizes_stay_small_enough_to_open_and_to_paste(scaled):
    hosts, report = scaled
    assert report["totals"]["hosts"] == hosts
    html_size, markdown_size = _size(html.render, report), _size(markdown.render, report)
    lines = terminal.render(report, ["/r/%s" % name for _f, name, _r in formats.FORMATS])
    assert html_size < HTML_LIMIT, html_size
    assert markdown_size < MARKDOWN_LIMIT, markdown_size
    assert len(lines) <= terminal.MAX_LINES <= 40


def test_the_fleet_wide_warning_is_one_row_with_every_host_behind_it(scaled):
    hosts, report = scaled
    clock = [g for g in views.finding_groups(report) if g.check_id == "system.time_sync"]
    assert len(clock) == 1 and len(clock[0].members) > 0.99 * hosts - 20
    page = "".join(html.render(report))
    table = page[page.index('id="findings-table"'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<tr data-check="system.time_sync" data-status="WARN"[^>]*>.*?</tr>', table, re.S)
    assert len(rows) == 1 and 'data-hosts="%d"' % len(clock[0].members) in rows[0]
    listed = re.search(r'<p class="hosts">(.*?)</p>', rows[0], re.S).group(1).split("<br>")
    assert listed == clock[0].hosts  # every host, one click away
    # FAIL and ERROR groups before any WARN group
    statuses = re.findall(r'<tr data-check="[^"]*" data-status="(\w+)"', table)
    assert statuses.index("WARN") > max(i for i, s in enumerate(statuses) if s in ("FAIL", "ERROR"))
    text = "".join(markdown.render(report))
    row = [line for line in text.splitlines() if line.startswith("| WARN | system.time\\_sync |")]
    assert len(row) == 1 and "| **%d hosts**: " % len(clock[0].members) in row[0] and "+%d more |" % (len(clock[0].members) - 5) in row[0]


def test_the_first_screen_leads_and_names_the_faults(scaled):
    _hosts, report = scaled
    page = "".join(html.render(report))
    header = page[page.index('<header id="summary">'):page.index("</header>")]
    assert "<table" not in header  # the first screen is sentences and lists: no table of hosts
    actions = re.findall(r'<li data-check="([^"]+)"><span class="tag c-(\w+)">', header)
    assert [s for _c, s in actions][:3] == ["FAIL", "FAIL", "ERROR"] and ("system.time_sync", "WARN") in actions
    assert page.index('<header id="summary">') < page.index('id="failing-table"') < page.index('id="host-table"')


@pytest.mark.parametrize("name", ["seven", "hostile"])
def test_no_format_shows_none_nan_or_a_python_repr_on_small_fleets(name):
    report = seven_hosts() if name == "seven" else hostile_report()
    for _format, file_name, render in formats.FORMATS:
        assert _leaks(render(report)) == [], file_name
    assert _leaks(text for text, _colour in terminal.render(report)) == []


def test_no_format_shows_none_nan_or_a_python_repr_at_scale(scaled):
    _hosts, report = scaled
    for _format, file_name, render in formats.FORMATS:
        assert _leaks(render(report)) == [], file_name
    assert _leaks(text for text, _colour in terminal.render(report)) == []


def test_the_leak_pattern_finds_what_it_is_for():
    assert _leaks(["GPU None 0000:19:00", "ok"]) and _leaks(["ratio ", "nan%"]) and _leaks(["{'index': 3}"])
    assert _leaks(["x" * 100 + " Non", "e here"])  # across two pieces
    assert _leaks(["x" * CHUNK + " Non", "e here"])  # across two chunks
    for leak in ("value -inf", "NaN", "['a']", "('a', 1)", "<report.Host object at 0x7f>", "dict_keys(['a'])"):
        assert _leaks([leak]), leak  # each shape has a literal CANDIDATES looks for
    assert not _leaks(["Nonetheless, nano, NaNa, information, infinite, ('a"[:-3]])
