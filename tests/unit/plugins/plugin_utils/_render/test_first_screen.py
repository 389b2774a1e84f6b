"""The report a person reads first (issue 29), on the 7-host fleet of tests/support/ops_fleet.py: four real faults
(an ECC FAIL, a GPU fallen off the bus named only by its address, an Xid 48, a hung nvidia-smi) among 23 warnings.

The first screen answers what is broken and what to do first before any per-host table; failing checks and findings
are one row per (check, status) once they cover more than a few hosts, FAIL and ERROR before WARN; every GPU is named
once, never "None"."""

import re
from html.parser import HTMLParser

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, markdown, terminal
from ansible_collections.continuum.hydra.tests.support.ops_fleet import ECC_HOST, HUNG_HOST, LOST_ADDRESS, LOST_HOST, SEVEN, XID48_HOST, seven_hosts

FAULTS = [("FAIL", "gpu.xid_errors", LOST_HOST), ("FAIL", "gpu.xid_errors", XID48_HOST), ("FAIL", "gpu.ecc_errors", ECC_HOST),
          ("ERROR", "driver.nvidia_smi", HUNG_HOST)]


@pytest.fixture(scope="module")
def report():
    return seven_hosts()


def _text(render, report):
    return "".join(render(report))


def _md_rows(section):
    """The cells of each table row of a Markdown section (pipes escaped in a cell are not boundaries)."""
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| status |")]


def _section(text, title):
    start = text.index("## %s\n" % title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def test_the_fleet_has_its_faults_and_its_warnings(report):
    warnings = [f for f in report["findings"] if f["open"] and f["status"] == "WARN"]
    assert len(warnings) == 23  # the rows the old "Open findings" table gave them, one per host, check and GPU
    assert sorted(report["failing"]) == ["driver.nvidia_smi", "gpu.ecc_errors", "gpu.xid_errors"]
    lost = report["failing"]["gpu.xid_errors"][0]
    assert lost["host"] == LOST_HOST and [g["index"] for g in lost["gpus"]] == [None, None, None]  # one GPU, three Xid codes
    assert {g["pci_bus_id"] for g in lost["gpus"]} == {LOST_ADDRESS}


def test_markdown_first_screen_comes_before_every_table_of_hosts(report):
    text = _text(markdown.render, report)
    order = [text.index(marker) for marker in (
        "**4 of 7 hosts need action: 3 failed, 1 error; 3 with warnings only.**", "## What to do first", "## Failing checks",
        "## Open findings", "## Hardware classes", "## Configuration drift", "## Stragglers")]
    assert order == sorted(order)
    first = _section(text, "What to do first")
    actions = re.findall(r"^(\d)\. \*\*(\w+)\*\* (\S+) on (\d+) hosts? \(([^)]*)\)", first, re.M)
    assert [(s, c.replace("\\_", "_"), int(n)) for _r, s, c, n, _h in actions] == [
        ("FAIL", "gpu.xid_errors", 2), ("FAIL", "gpu.ecc_errors", 1), ("ERROR", "driver.nvidia_smi", 1),
        ("WARN", "system.time_sync", 6), ("WARN", "gpu.persistence_mode", 2)]
    assert actions[0][4] == "%s, %s" % (LOST_HOST, XID48_HOST)
    assert "- **failed** (3): %s, %s, %s" % (ECC_HOST, LOST_HOST, XID48_HOST) in first and "- **error** (1): %s" % HUNG_HOST in first


def test_markdown_failing_checks_are_the_four_faults_worst_first(report):
    rows = _md_rows(_section(_text(markdown.render, report), "Failing checks"))
    assert [(r[0], r[1].replace("\\_", "_"), r[2]) for r in rows] == FAULTS
    lost = rows[0]
    # the lost GPU named once, by what is known of it: its address (the log gives no index), never "GPU None"
    assert lost[4] == "GPU at %s" % LOST_ADDRESS and "None" not in " ".join(lost)
    assert rows[1][4].startswith("GPU 2 00000000:30:00.0 GPU-") and rows[2][4].startswith("GPU 3 00000000:40:00.0 GPU-")


def test_markdown_findings_group_the_warnings_after_the_faults(report):
    rows = _md_rows(_section(_text(markdown.render, report), "Open findings"))
    statuses = [r[0] for r in rows]
    assert statuses == ["FAIL"] * 3 + ["ERROR"] + ["WARN"] * 4, rows
    warn = [(r[1].replace("\\_", "_"), r[2]) for r in rows if r[0] == "WARN"]
    clock = [h for h in SEVEN if h != HUNG_HOST]  # doctor's run on the hung host had no clock check
    assert warn[0] == ("system.time_sync", "**6 hosts**: %s +1 more" % ", ".join(clock[:5]))
    assert [w[0] for w in warn[1:]] == ["gpu.persistence_mode", "gpu.persistence_mode", "gpu.xid_errors"]
    persistence = [r for r in rows if r[1] == "gpu.persistence\\_mode"][0]
    assert persistence[3].count("GPU ") == 8 and persistence[3].startswith("GPU 0 GPU-")  # its 8 GPUs in one cell, in order


def test_a_group_larger_than_a_few_hosts_is_one_row_and_small_ones_a_row_per_host(report):
    groups = dict(((g.check_id, g.status), g) for g in views.finding_groups(report))
    clock = groups[("system.time_sync", "WARN")]
    assert not clock.expanded and len(clock.members) == 6 > views.FEW_HOSTS
    assert groups[("gpu.persistence_mode", "WARN")].expanded
    rows = views.finding_table(report)
    assert sum(1 for _g, member, _c in rows if member is None) == 1
    assert len(rows) == 8  # 3 FAIL + 1 ERROR + 4 WARN, where one row per host, check and GPU made 27


class _Page(HTMLParser):
    """Element order, the rows of the grouped tables, and the text inside the first screen."""

    def __init__(self):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.order, self.rows, self.stack, self.summary_text, self.details = [], {}, [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.order.append(attrs["id"])
        table = next((a.get("id") for t, a in reversed(self.stack) if t == "table"), None)
        if tag == "tr" and attrs.get("data-status") and table:
            self.rows.setdefault(table, []).append(attrs)
        if tag not in ("br", "meta"):
            self.stack.append((tag, attrs))

    def handle_endtag(self, tag):
        for n in range(len(self.stack) - 1, -1, -1):
            if self.stack[n][0] == tag:
                del self.stack[n:]
                break

    def handle_data(self, data):
        if any(a.get("id") == "summary" for _t, a in self.stack):
            self.summary_text.append(data)
        if any(t == "details" for t, _a in self.stack):
            self.details.append(data)


def test_html_first_screen_and_grouped_tables(report):
    page = _Page()
    page.feed(_text(html.render, report))
    order = page.order
    assert order.index("summary") < order.index("first") < order.index("failing-table") < order.index("findings-table") \
        < order.index("host-table")
    summary = "".join(page.summary_text)
    assert "4 of 7 hosts need action: 3 failed, 1 error; 3 with warnings only." in summary
    assert "gpu.xid_errors on 2 hosts (%s, %s)" % (LOST_HOST, XID48_HOST) in summary
    failing = [(r["data-status"], r["data-check"], r.get("data-host")) for r in page.rows["failing-table"]]
    assert failing == FAULTS
    findings = page.rows["findings-table"]
    assert [r["data-status"] for r in findings] == ["FAIL"] * 3 + ["ERROR"] + ["WARN"] * 4
    (group,) = [r for r in findings if r.get("class") == "group"]
    assert (group["data-check"], group["data-hosts"]) == ("system.time_sync", "6")
    # the collapsed group's <details> holds every one of its hosts: one click away
    listed = "".join(page.details)
    assert all(host in listed for host in SEVEN if host != HUNG_HOST)


def test_terminal_names_the_faults_and_groups_the_warnings(report):
    lines = [text for text, _colour in terminal.render(report, ["/r/fleet-report.json", "/r/fleet-report.md"])]
    assert len(lines) <= terminal.MAX_LINES
    text = "\n".join(lines)
    assert "  FAIL  gpu.xid_errors               %s (GPU at %s), %s (GPU 2 00000000:30:00.0 GPU-" % (
        LOST_HOST, LOST_ADDRESS, XID48_HOST) in text
    assert "  WARN  system.time_sync             6 hosts: " in text
    assert "Reports in /r: fleet-report.json, fleet-report.md" in text
    assert "None" not in text
