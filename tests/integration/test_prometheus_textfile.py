"""fleet-report.prom through the real tools: promtool's linter, a real prometheus-node-exporter scraping it with
its textfile collector, and promtool's PromQL parser on every query of the Grafana dashboard."""

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import prometheus
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import printable
from ansible_collections.continuum.hydra.tests.support import interconnect as ic
from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import DRIFTER, STRAGGLER, hostile_report
from ansible_collections.continuum.hydra.tests.support.prometheus import parse_prom

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not (shutil.which("promtool") and shutil.which("prometheus-node-exporter")),
                                 reason="promtool / prometheus-node-exporter not installed (tests/utils/system-deps.sh)")]

DASHBOARD = os.path.join(REPO, "docs", "grafana", "hydra-fleet.json")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode("utf-8")


@pytest.fixture(scope="module")
def textfile(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("textfile"))
    path = os.path.join(directory, "fleet-report.prom")
    report = hostile_report()
    write_atomic(path, prometheus.render(report))
    with open(path, encoding="utf-8") as handle:
        return {"dir": directory, "path": path, "text": handle.read(), "report": report}


@pytest.fixture(scope="module")
def node_exporter(textfile):
    port = _free_port()
    proc = subprocess.Popen(["prometheus-node-exporter", "--collector.disable-defaults", "--collector.textfile",
                             "--collector.textfile.directory=%s" % textfile["dir"], "--web.listen-address=127.0.0.1:%d" % port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = "http://127.0.0.1:%d/metrics" % port
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                _scrape(url)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("node exporter did not start: %s" % proc.stderr.read().decode()[-2000:]) from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_promtool_finds_no_problem(textfile):
    proc = subprocess.run(["promtool", "check", "metrics"], input=textfile["text"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc.stdout + proc.stderr


def test_promtool_would_catch_a_broken_file(textfile):
    broken = textfile["text"].replace('hydra_fleet_hosts{status="healthy"}', 'hydra_fleet_hosts{status="healthy}', 1)
    proc = subprocess.run(["promtool", "check", "metrics"], input=broken, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0


def test_node_exporter_serves_every_sample_with_its_labels_intact(textfile, node_exporter):
    scraped = parse_prom(_scrape(node_exporter))
    errors = [s for s in scraped if s[0] == "node_textfile_scrape_error"]
    assert errors == [("node_textfile_scrape_error", {}, 0.0)]
    ours = sorted((n, sorted(labels.items()), v) for n, labels, v in scraped if n.startswith("hydra_"))
    written = sorted((n, sorted(labels.items()), v) for n, labels, v in parse_prom(textfile["text"]))
    assert ours == written and len(ours) > 100
    hosts = set(dict(labels)["host"] for n, labels, v in ours if n == "hydra_host_status")
    assert hosts == set(printable(h.replace("\r\n", "\n")) for h in textfile["report"]["hosts"])  # control characters replaced
    assert [dict(labels)["host"] for n, labels, v in ours if n == "hydra_straggler_ratio"] == [STRAGGLER]
    assert [dict(labels)["host"] for n, labels, v in ours if n == "hydra_host_drift"] == [DRIFTER]


def test_node_exporter_reports_a_bad_textfile_so_the_check_above_means_something(textfile, node_exporter):
    bad = os.path.join(textfile["dir"], "broken.prom")
    with open(bad, "w") as handle:
        handle.write('hydra_oops{host="a} 1\n')
    try:
        errors = [s for s in parse_prom(_scrape(node_exporter)) if s[0] == "node_textfile_scrape_error"]
        assert errors == [("node_textfile_scrape_error", {}, 1.0)]
    finally:
        os.unlink(bad)


def _interconnect_text(tmp_path):
    """fleet-report.prom of two runs of 4 hosts read from recorded trees: a port erring, one flapping, one down."""
    fleet = ic.Fleet(tmp_path / "interconnect", hosts=4)
    a, b, _c, d = fleet.names
    fleet.run(ic.T0, "2026-11-22T10:00:00+00:00")
    ic.add_to_counter(fleet.roots[a], "mlx5_4", "symbol_error", 500)
    ic.add_to_counter(fleet.roots[b], "mlx5_6", "link_downed", 1)
    ic.set_port(fleet.roots[d], "mlx5_7", state="1: DOWN", phys_state="2: Polling")
    return "".join(prometheus.render(fleet.run(ic.T0 + 2 * ic.HOUR, "2026-11-22T12:00:00+00:00")))


def test_every_grafana_query_parses_and_reads_metrics_the_file_has(textfile, tmp_path):
    with open(DASHBOARD) as handle:
        dashboard = json.load(handle)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) == len(dashboard["panels"]) >= 10
    texts = (textfile["text"], _interconnect_text(tmp_path))  # the hostile fleet has no interconnect readings
    families = set(line.split()[2] for text in texts for line in text.splitlines() if line.startswith("# TYPE"))
    assert "hydra_interconnect_peer_port" in families
    for expr in exprs:
        used = set(re.findall(r"\bhydra_[a-z_]+\b", expr))
        assert used and used <= families, (expr, used - families)
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": "dashboard:panel_%d" % n, "expr": re.sub(r"\$(%s)\b" % "|".join(variables), ".*", expr)}
        for n, expr in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(json.dumps(rules))
    proc = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "SUCCESS: %d rules found" % len(exprs) in proc.stdout, proc.stdout + proc.stderr
