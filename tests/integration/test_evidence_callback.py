"""Evidence files through a real ansible-playbook run of playbooks/doctor.yml with the fleet_report callback: the GPU
with uncorrectable ECC errors gets evidence/<host>/<uuid>.json naming its serial, linked from the .md and .html."""

import json
import os

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    UNCORRECTABLE_ECC,
    fixture,
    host_serial,
    host_uuid,
    host_vars,
    plant,
    run_playbook,
    write_host_bin,
)
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator

pytestmark = pytest.mark.integration

# The recording's GPU 0, as the simulated host a100-ecc reports it (tests/support/fleet.py own_gpus).
A100_UUID = host_uuid("GPU-513536b6-7d19-9063-b049-1e69664bb298", "a100-ecc")
A100_SERIAL = host_serial("1650522003820", "a100-ecc")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("evidence-fleet"))
    a100 = fixture("a100-sxm4-v12.xml")
    inventory = {"all": {"hosts": {
        "a100-ok": host_vars(write_host_bin(root, "a100-ok", plant(a100, PERSISTENCE_ON))),
        "a100-ecc": host_vars(write_host_bin(root, "a100-ecc", plant(a100, PERSISTENCE_ON, UNCORRECTABLE_ECC))),
    }}}
    report_dir = os.path.join(root, "reports")
    os.makedirs(report_dir)
    proc, report = run_playbook(inventory, report_dir, extra_vars={"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND})
    assert report is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    return report_dir, proc, report


def test_the_failing_gpu_has_an_evidence_file_naming_its_serial(run):
    report_dir, proc, report = run
    assert report["evidence"] == [{"host": "a100-ecc", "uuid": A100_UUID, "pci_bus_id": "00000000:01:00.0",
                                   "serial": A100_SERIAL, "path": "evidence/a100-ecc/%s.json" % A100_UUID}]
    with open(os.path.join(report_dir, "evidence", "a100-ecc", A100_UUID + ".json")) as handle:
        record = json.load(handle)
    assert (record["host"], record["uuid"], record["serial"], record["pci_bus_id"]) == ("a100-ecc", A100_UUID, A100_SERIAL, "00000000:01:00.0")
    assert record["board_part_number"] == "692-2G506-0212-002" and record["vbios_version"] == "92.00.36.00.02"
    assert "gpu.ecc_errors" in [c["id"] for c in record["failing_checks"]]
    assert "nvidia-bug-report.sh" in record["bug_report"]["command"]
    assert not os.path.exists(os.path.join(report_dir, "evidence", "a100-ok"))
    assert "Evidence for the vendor: 1 file" in proc.stdout
    schema_validator().validate(report)


def test_the_markdown_and_html_reports_link_the_evidence_file(run):
    report_dir, _proc, _report = run
    path = "evidence/a100-ecc/%s.json" % A100_UUID
    with open(os.path.join(report_dir, "fleet-report.md")) as handle:
        markdown = handle.read()
    with open(os.path.join(report_dir, "fleet-report.html")) as handle:
        html = handle.read()
    assert "](%s)" % path in markdown and "## Evidence for the vendor" in markdown
    assert '<a href="%s">' % path in html and 'id="evidence"' in html
