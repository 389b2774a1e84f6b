"""fleet-report.html opened in a real headless Chromium (no network): one run takes a screenshot and dumps the
DOM the browser built, and the test asserts on that DOM: every host present, stragglers and drift marked,
hostile names as text (no element injected), charts drawn."""

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import printable
from ansible_collections.continuum.hydra.tests.support.fleet_factory import SyntheticFleet
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import DRIFTER, HOSTILE_HOSTS, STRAGGLER, UNREACHABLE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.integration, pytest.mark.skipif(not CHROMIUM, reason="chromium not installed (tests/utils/system-deps.sh)")]
# TOOLCHAIN flags, plus every host name resolving nowhere and a dead proxy: the page cannot fetch anything.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--proxy-server=http://127.0.0.1:9", "--window-size=1280,900"]


def _fleet_report():
    """Four classes of healthy hosts plus the hostile ones; a slow host, a slow GPU, drift, a failing and an
    unreachable host."""
    fleet = SyntheticFleet({"a100x8": 12, "a10gx4": 10, "t4x1": 6, "ada4000x2": 5}, seed=21, cv=0.01)
    hostile = SyntheticFleet({"a10gx4": len(HOSTILE_HOSTS)}, seed=22, cv=0.01)
    for old, new in zip(hostile.names("a10gx4"), HOSTILE_HOSTS):
        fleet.hosts[new] = hostile.hosts.pop(old)
    fleet.slow_host(STRAGGLER, 0.7, "triad_gbps")
    slow_gpu = fleet.slow_gpu("a100x8-00004", 6, 0.75)
    fleet.set_env(DRIFTER, "driver_version", '999.<b>"1"</b>&')
    collector = fleet.collector()
    collector.add_unreachable(UNREACHABLE, "ssh: connect to host <gone>: Connection refused")
    report = analyse(collector.build("2026-11-22T13:00:00+00:00", "doctor.yml"), AnalysisOptions(history=[]))
    return report, slow_gpu


class _Dom(HTMLParser):
    """Rows of the host table, every element with a data-host, and what the charts drew."""

    def __init__(self):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.stack, self.rows, self.marked, self.tags, self.texts, self.bold = [], [], [], {}, [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        table = next((a.get("id") for t, a in reversed(self.stack) if t == "table"), None)
        if tag == "tr" and table == "host-table" and "data-host" in attrs:
            self.rows.append((attrs["data-host"], attrs.get("data-status"), (attrs.get("class") or "").split()))
        if "data-host" in attrs:
            self.marked.append((tag, attrs["data-host"], (attrs.get("class") or "").split(), table))
        if tag not in ("meta", "line", "rect", "circle"):
            self.stack.append((tag, attrs))

    def handle_endtag(self, tag):
        for n in range(len(self.stack) - 1, -1, -1):
            if self.stack[n][0] == tag:
                del self.stack[n:]
                break

    def handle_data(self, data):
        self.texts.append(data)
        if self.stack and self.stack[-1][0] == "b":
            self.bold.append(data)


def _png_pixels_vary(path):
    """Width, height, and whether the decoded image has more than a handful of distinct byte values."""
    with open(path, "rb") as handle:
        data = handle.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat))) > 16


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    report, slow_gpu = _fleet_report()
    out = tmp_path_factory.mktemp("html")
    page = os.path.join(str(out), "fleet-report.html")
    write_atomic(page, html.render(report))
    shot = os.path.join(str(out), "screenshot.png")
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        proc = subprocess.run([CHROMIUM] + FLAGS + ["--user-data-dir=%s" % profile, "--screenshot=%s" % shot, "--dump-dom",
                                                    "file://" + page], capture_output=True, timeout=120, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    # bytes, not text=True: universal newlines would fold a CR in a host name the browser kept
    dumped = proc.stdout.decode("utf-8")
    assert proc.returncode == 0 and "<html" in dumped, proc.stderr.decode("utf-8", "replace")[-2000:]
    dom = _Dom()
    dom.feed(dumped)
    return {"report": report, "dom": dom, "screenshot": shot, "slow_gpu": slow_gpu}


def test_every_host_is_a_row_of_the_host_table_and_nothing_was_injected(browser):
    report, dom = browser["report"], browser["dom"]
    shown = dict((h, printable(h, keep="\t\n\r")) for h in report["hosts"])  # control characters replaced
    assert sorted(h for h, dummy, dummy2 in dom.rows) == sorted(shown.values())
    assert len(dom.rows) == len(report["hosts"])  # "</td></tr><tr><td>row" in a host name made no extra row
    assert dict((h, s) for h, s, dummy in dom.rows) == dict((shown[h], e["status"]) for h, e in report["hosts"].items())
    # the hostile GPU name and driver version carry <b>: as text, never as elements
    assert "script" not in dom.tags and "A10G" not in dom.bold and '"1"' not in dom.bold
    text = "".join(dom.texts)
    for host in HOSTILE_HOSTS:
        assert printable(host, keep="\t\n\r") in text, host


def test_stragglers_and_drift_are_marked(browser):
    dom = browser["dom"]
    marked = dict((h, c) for h, dummy, c in dom.rows)
    assert sorted(h for h, c in marked.items() if "straggler" in c) == sorted([STRAGGLER, "a100x8-00004"])
    assert sorted(h for h, c in marked.items() if "drift" in c) == [DRIFTER]
    dots = sorted(h for tag, h, classes, dummy in dom.marked if tag == "circle" and "straggler" in classes)
    assert dots == sorted([STRAGGLER, "a100x8-00004"])
    rows = sorted(h for tag, h, classes, table in dom.marked if table == "straggler-table")
    assert rows == sorted([STRAGGLER, "a100x8-00004"])


def test_the_charts_were_drawn_and_the_screenshot_shows_the_page(browser):
    dom = browser["dom"]
    analysis = browser["report"]["analysis"]
    metrics = len(analysis["stragglers"]["host_metrics"]) + len(analysis["stragglers"]["gpu_metrics"])
    assert dom.tags["svg"] == 1 + metrics  # status by class, then one chart per benchmark
    assert dom.tags["rect"] >= len(analysis["classes"])
    width, height, varied = _png_pixels_vary(browser["screenshot"])
    assert (width, height) == (1280, 900) and varied


# ---------------------------------------------------------------- the first screen (issue 29)

def _open(page_path, out_dir, name):
    """Chromium's screenshot of the first 1280x900 of a page and the DOM it built."""
    shot = os.path.join(out_dir, "%s.png" % name)
    profile = tempfile.mkdtemp(prefix="chromium-")
    try:
        proc = subprocess.run([CHROMIUM] + FLAGS + ["--user-data-dir=%s" % profile, "--screenshot=%s" % shot, "--dump-dom",
                                                    "file://" + page_path], capture_output=True, timeout=120, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    dumped = proc.stdout.decode("utf-8")
    assert proc.returncode == 0 and "<html" in dumped, proc.stderr.decode("utf-8", "replace")[-2000:]
    return dumped, shot


class _Ids(HTMLParser):
    """Every id in document order, the grouped rows, and the host names inside <details>."""

    def __init__(self):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.ids, self.groups, self.details, self.depth = [], [], [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        if tag == "tr" and attrs.get("class") == "group":
            self.groups.append((attrs["data-check"], attrs["data-status"], int(attrs["data-hosts"])))
        self.depth += tag == "details"

    def handle_endtag(self, tag):
        self.depth -= tag == "details"

    def handle_data(self, data):
        if self.depth:
            self.details.append(data)


@pytest.fixture(scope="module", params=["seven", "1k"])
def first_screen(request, tmp_path_factory):
    from ansible_collections.continuum.hydra.tests.support.ops_fleet import scale_report, seven_hosts

    report = seven_hosts() if request.param == "seven" else scale_report(1000)
    out = str(tmp_path_factory.mktemp("first-screen"))
    page = os.path.join(out, "fleet-report.html")
    write_atomic(page, html.render(report))
    dumped, shot = _open(page, out, "first-screen-%s" % request.param)
    dom = _Ids()
    dom.feed(dumped)
    return report, dom, shot


def test_the_first_screen_is_drawn_before_any_table_of_hosts(first_screen):
    report, dom, shot = first_screen
    ids = dom.ids
    # the browser's DOM: summary (headline, totals, what to do first) before the grouped tables, they before every host
    assert ids.index("summary") < ids.index("totals") < ids.index("first") < ids.index("failing-table") < ids.index("host-table")
    per_host = [i for i in ("evidence-table", "drift-table", "straggler-table", "host-table") if i in ids]
    assert all(ids.index("failing-table") < ids.index(i) for i in per_host)
    width, height, varied = _png_pixels_vary(shot)
    assert (width, height) == (1280, 900) and varied


def test_a_group_of_many_hosts_is_one_row_that_opens_to_all_of_them(first_screen):
    report, dom, _shot = first_screen
    (clock,) = [g for g in dom.groups if g[0] == "system.time_sync"]
    hosts = [h for h, e in report["hosts"].items() if "system.time_sync" in e["warning_checks"]]
    assert clock[1:] == ("WARN", len(hosts))
    listed = "".join(dom.details)
    assert all(host in listed for host in hosts)
