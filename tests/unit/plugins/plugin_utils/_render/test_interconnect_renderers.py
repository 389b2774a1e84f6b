"""The Interconnect section in every format: each encodes the one analysis (_fleet/interconnect.py) of a fleet whose
counters were read from recorded trees with faults planted between two runs."""

import json
import shutil
import subprocess

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, json_report, markdown, prometheus, terminal
from ansible_collections.continuum.hydra.tests.support import interconnect as ic
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator
from ansible_collections.continuum.hydra.tests.support.interconnect import HOUR, T0, Fleet
from ansible_collections.continuum.hydra.tests.support.prometheus import parse_prom


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Four hosts: a's mlx5_4 counts 500 symbol errors in 2 h, b's mlx5_6 flapped (link_downed +1), c's mlx5_5 runs at
    200 Gb/s, d's mlx5_7 is down; a's mlx5_5 was cleared (a reset)."""
    fleet = Fleet(tmp_path_factory.mktemp("interconnect"), hosts=4)
    a, b, c, d = fleet.names
    ic.set_counter(fleet.roots[a], "mlx5_5", "symbol_error", 900)
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    ic.add_to_counter(fleet.roots[a], "mlx5_4", "symbol_error", 500)
    ic.set_counter(fleet.roots[a], "mlx5_5", "symbol_error", 2)
    ic.add_to_counter(fleet.roots[b], "mlx5_6", "link_downed", 1)
    ic.set_port(fleet.roots[c], "mlx5_5", rate="200 Gb/sec (4X HDR)")
    ic.set_port(fleet.roots[d], "mlx5_7", state="1: DOWN", phys_state="2: Polling")
    report = fleet.run(T0 + 2 * HOUR, "2026-11-22T12:00:00+00:00")
    return report, fleet.names


def _text(render, report):
    return "".join(render(report))


def test_the_views_say_what_the_analysis_found(planted):
    report, (a, b, c, d) = planted
    rates = views.interconnect_rate_rows(report)
    assert rates[:2] == [(FAIL, b, "mlx5_6/1", "link_downed", "+1", "any increase", "2.0 h"),
                         (FAIL, a, "mlx5_4/1", "symbol_error", "250/hour", "120/hour", "2.0 h")]
    assert len(rates) == 2
    assert views.interconnect_flap_rows(report) == [(b, "mlx5_6/1", "link_downed +1"), (d, "mlx5_7/1", "state ACTIVE -> DOWN")]
    assert views.interconnect_peer_rows(report) == [
        (WARN, c, "mlx5_5/1", "ACTIVE at 200 Gb/s", "ACTIVE at 400 Gb/s on 4 of 4 hosts", "%s, %s, %s" % (a, b, d)),
        (FAIL, d, "mlx5_7/1", "DOWN", "ACTIVE at 400 Gb/s on 3 of 4 hosts", "%s, %s, %s" % (a, b, c))]
    assert (a, "mlx5_5/1", "interval restarted: symbol_error lower than the last run's (cleared, driver reloaded or wrapped)") in \
        views.interconnect_reset_rows(report)
    line = views.interconnect_line(report)
    assert line == ("Interconnect: 4 hosts read, 1 reset interval, 2 flaps, 2 ports off their peers; 2 rates over the limit; "
                    "worst: %s mlx5_6/1 link_downed +1" % b)


def test_json_validates_and_markdown_html_terminal_prometheus_show_the_ports(planted):
    report, (a, b, c, d) = planted
    errors = sorted(schema_validator().iter_errors(json.loads(_text(json_report.render, report))), key=str)
    assert not errors, errors[0]
    md = _text(markdown.render, report)
    assert "## Interconnect" in md and "### Worst ports and links by rate" in md and "### Ports off their peers" in md
    assert "| FAIL | %s | mlx5\\_4/1 | symbol\\_error | 250/hour | 120/hour | 2.0 h |" % a.replace("_", "\\_") in md
    page = _text(html.render, report)
    assert '<section id="interconnect">' in page and 'id="interconnect-peer-table"' in page
    assert '<tr data-host="%s" data-status="FAIL"><td>FAIL</td><td>%s</td><td>mlx5_7/1</td><td>DOWN</td>' % (d, d) in page
    lines = [text for text, _colour in terminal.render(report)]
    assert any(t.startswith("Interconnect: 4 hosts read") for t in lines)
    assert "  FAIL  %s mlx5_4/1 symbol_error 250/hour over 2.0 h (limit 120/hour)" % a in lines
    samples = parse_prom(_text(prometheus.render, report))
    rate = [(labels, v) for name, labels, v in samples if name == "hydra_interconnect_error_rate" and labels["host"] == a
            and labels["subject"] == "mlx5_4/1"]
    assert rate == [({"host": a, "kind": "ib", "subject": "mlx5_4/1", "counter": "symbol_error", "unit": "hour"}, 250.0)]
    assert ("hydra_interconnect_flap", {"host": b, "kind": "ib", "subject": "mlx5_6/1"}, 1.0) in samples
    assert ("hydra_interconnect_peer_port", {"host": d, "subject": "mlx5_7/1", "status": FAIL}, 1.0) in samples
    over = [(labels["host"], labels["subject"], labels["status"]) for name, labels, _v in samples if name == "hydra_interconnect_over_limit"]
    assert over == [(b, "mlx5_6/1", FAIL), (a, "mlx5_4/1", FAIL)]


@pytest.mark.skipif(not shutil.which("promtool"), reason="needs promtool (tests/utils/system-deps.sh installs it)")
def test_the_interconnect_gauges_pass_promtool(planted):
    report, _names = planted
    proc = subprocess.run(["promtool", "check", "metrics"], input=_text(prometheus.render, report), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
