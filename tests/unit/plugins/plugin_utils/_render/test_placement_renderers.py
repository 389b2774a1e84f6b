"""The placement section in every format: each encodes the same analysis (_fleet/placement.py)."""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FLEET_SCHEMA_VERSION
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, json_report, markdown, prometheus, terminal
from ansible_collections.continuum.hydra.tests.support import fleet_factory
from ansible_collections.continuum.hydra.tests.support.placement_fleet import (
    NUMA3_CPUS,
    dgx_a100,
    fleet_report,
    moved_off_switch,
    topology_record,
)
from ansible_collections.continuum.hydra.tests.support.prometheus import parse_prom


@pytest.fixture(scope="module")
def placed():
    """Four DGX A100 hosts: one as built, one with GPU1 off its NICs' switch, one whose job is bound to NUMA node 3's
    CPUs, one whose topology could not be read."""
    records = [topology_record(dgx_a100()), topology_record(moved_off_switch(dgx_a100())),
               topology_record(dgx_a100(), bound_cpus=NUMA3_CPUS), fleet_factory.check("gpu.topology", ERROR)]
    return fleet_report(records)


def _text(render, report):
    return "".join(render(report))


def test_rows_lowest_host_first_with_gpus_and_nearest_nic(placed):
    report, names = placed
    rows = views.placement_rows(report)
    assert [r[0] for r in rows] == [names[1], names[2]]
    assert rows[0][2] == 0.0 and rows[0][3] == [("GPU1", 0.0, "mlx5_0 SYS")]
    assert [g for g, _s, _n in rows[1][3]] == ["GPU%d" % i for i in range(2, 8)]
    line = views.placement_line(report)
    assert line.startswith("GPU placement: 2 of 3 scored hosts with GPUs below 60 (lowest: %s GPU1 0, nearest NIC mlx5_0 SYS)"
                           % names[1])
    assert line.endswith("; 1 host not scored")


def test_markdown_and_html_tables(placed):
    report, names = placed
    text = _text(markdown.render, report)
    section = text[text.index("## GPU placement"):]
    assert "| %s |" % names[1] in section and "GPU1 0 (mlx5\\_0 SYS)" in section
    assert "GPU2 58.3 (mlx5\\_2 PXB)" in section
    assert "| %s | gpu.topology ERROR: gpu.topology: ERROR |" % names[3] in section
    page = _text(html.render, report)
    block = page[page.index('<section id="placement">'):]
    block = block[:block.index("</section>")]
    assert '<tr data-host="%s"><td>%s</td>' % (names[1], names[1]) in block and "GPU1 0 (mlx5_0 SYS)" in block
    assert block.count("<tr data-host=") == 3  # two hosts below, one unscored


def test_terminal_one_line(placed):
    report, _names = placed
    lines = [text for text, _colour in terminal.render(report, [])]
    matching = [text for text in lines if text.startswith("GPU placement:")]
    assert matching == [views.placement_line(report)]


def test_prometheus_gauge_per_host_and_gpu(placed):
    report, names = placed
    samples = parse_prom(_text(prometheus.render, report))
    scores = dict(((labels["host"], labels["gpu"]), value) for name, labels, value in samples
                  if name == "hydra_gpu_placement_score")
    assert scores[(names[1], "GPU1")] == 0.0 and scores[(names[0], "GPU0")] == 87.5
    assert scores[(names[2], "GPU3")] == pytest.approx(58.3)
    assert len(scores) == 24 and not any(host == names[3] for host, _gpu in scores)


def test_json_carries_the_section_and_the_new_schema_version(placed):
    report, _names = placed
    parsed = json.loads(_text(json_report.render, report))
    assert parsed["schema_version"] == FLEET_SCHEMA_VERSION == "1.6.0"
    assert parsed["placement"] == report["placement"]


def test_no_placement_no_section():
    report, _names = fleet_report([None])
    assert "GPU placement" not in _text(markdown.render, report)
    assert 'id="placement"' not in _text(html.render, report)
    assert "hydra_gpu_placement_score" not in _text(prometheus.render, report)
