"""fleet-report.md rendered by a real CommonMark renderer (markdown-it-py, with GFM tables and raw HTML on,
as GitHub and GitLab render it): dates and numbers unescaped, code spans literal, hostile strings inert,
table rows whole."""

import copy
from html.parser import HTMLParser

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._render import markdown
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import HOSTILE_GPU_NAME, HOSTILE_HOSTS, UNREACHABLE, hostile_report

markdown_it = pytest.importorskip("markdown_it")

CODE_REMEDIATION = "Drain the node, reset the GPU (`nvidia-smi -r -i <index>` with no processes on it) or reboot"


class _Page(HTMLParser):
    """Elements, text and table rows of the rendered page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.text, self.codes, self.rows, self.tables = [], [], [], [], []
        self._row, self._cell, self._code = None, None, None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "code":
            self._code = []

    def handle_endtag(self, tag):
        if tag == "tr":
            self.rows.append(self._row)
            self.tables[-1].append(self._row)
            self._row = None
        elif tag in ("td", "th") and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "code":
            self.codes.append("".join(self._code))
            self._code = None

    def handle_data(self, data):
        self.text.append(data)
        for part in (self._cell, self._code):
            if part is not None:
                part.append(data)


@pytest.fixture(scope="module")
def page():
    report = copy.deepcopy(hostile_report())
    report["generated_at"] = "2026-11-23T13:00:00+00:00"
    report["actions"][0]["remediation"] = CODE_REMEDIATION
    source = "".join(markdown.render(report))
    rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(source)
    parsed = _Page()
    parsed.feed(rendered)
    parsed.close()
    return source, parsed


def test_dates_numbers_and_plurals_are_plain(page):
    source, parsed = page
    text = "".join(parsed.text)
    assert "2026-11-23T13:00:00+00:00" in source and "2026\\-11" not in source
    assert "2026-11-23T13:00:00+00:00, playbook doctor<&>.yml: 2 of 9 hosts need action: 1 failed, 1 unreachable" in text
    assert "History (1 run)" in text and "1 runs" not in text and "1 hosts" not in text
    assert not any("\\" in cell for row in parsed.rows for cell in row if any(c.isdigit() for c in cell) and "%" in cell)


def test_code_spans_show_their_content_literally(page):
    source, parsed = page
    assert "`nvidia-smi -r -i <index>`" in source
    assert "nvidia-smi -r -i <index>" in parsed.codes


def test_hostile_strings_cannot_inject_html(page):
    dummy, parsed = page
    assert set(parsed.tags) <= {"h1", "h2", "p", "strong", "em", "table", "thead", "tbody", "tr", "th", "td", "br", "code", "blockquote",
                                "ol", "ul", "li"}
    text = "".join(parsed.text)
    for host in HOSTILE_HOSTS[:2] + [HOSTILE_HOSTS[7], UNREACHABLE]:
        assert host in text  # shown as text, whole
    assert HOSTILE_GPU_NAME not in "".join(parsed.tags)
    assert not any(ch in text for ch in "\x07\x1b")  # control characters replaced


def test_tables_keep_their_columns(page):
    source, parsed = page
    tables = [block for block in source.split("\n\n") if block.startswith("| ")]
    assert len(parsed.tables) == len(tables) >= 5
    for block, table in zip(tables, parsed.tables):
        header = block.split("\n", 1)[0]
        assert len(table) == len(block.splitlines()) - 1  # every row of the source is a row of the table
        assert set(len(row) for row in table) == {len(table[0])}, header
    cells = [cell for table in parsed.tables for row in table for cell in row]
    assert "pipe|star*_under_tick" in cells and "line<br>break" not in cells


def test_no_format_carries_a_control_character_from_the_fleet():
    import re

    from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, junit, prometheus, terminal

    report = copy.deepcopy(hostile_report())
    gpu = report["hosts"][HOSTILE_HOSTS[0]]["profile"]["gpus"][0]
    gpu["name"] = "GPU\x85name\x9b31m\x00"
    controls = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
    for render in (markdown.render, html.render, junit.render, prometheus.render):
        text = "".join(render(report))
        assert not controls.search(text), render.__module__
    lines = "\n".join(t for t, dummy in terminal.render(report))
    assert not controls.search(lines)
