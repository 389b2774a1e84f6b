"""A real ansible-playbook run of playbooks/doctor.yml at level deep on a local host without a GPU.

No nvidia-smi, no torch in the module's interpreter (the test venv): the active GPU checks SKIP with the reason,
and system.memory_bandwidth is judged from a real NumPy triad and a C STREAM triad compiled on the spot.
"""

import os

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import host_vars, run_playbook, write_host_bin

pytestmark = pytest.mark.integration

GPU_ACTIVE = ("gpu.matmul_consistency", "gpu.memory_bandwidth", "gpu.pcie_under_load", "gpu.allreduce_local")


@pytest.fixture(scope="module")
def deep_run(tmp_path_factory):
    try:
        import torch  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import
        pytest.skip("torch is importable here: the GPU checks would not SKIP")
    except ImportError:
        pass
    root = str(tmp_path_factory.mktemp("deep"))
    hosts = {"cpu-deep": host_vars(write_host_bin(root, "cpu-deep"))}
    report_dir = os.path.join(root, "reports")
    os.makedirs(report_dir)
    proc, report = run_playbook({"all": {"hosts": hosts}}, report_dir, extra_vars={"hydra_level": "deep"}, timeout=600)
    assert report is not None, "no fleet report written:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-4000:])
    return report["hosts"]["cpu-deep"]["doctor"]


def checks(doctor):
    return dict((c["id"], c) for c in doctor["checks"])


def test_deep_without_a_gpu_has_no_error(deep_run):
    errors = dict((cid, c["message"]) for cid, c in checks(deep_run).items() if c["status"] == "ERROR")
    assert errors == {}


def test_the_active_gpu_checks_skip_with_the_reason(deep_run):
    found = checks(deep_run)
    for check_id in GPU_ACTIVE:
        assert found[check_id]["status"] == "SKIP", (check_id, found[check_id]["message"])
        assert "torch is not importable" in found[check_id]["message"]
    assert deep_run["probes"]["gpu_active"]["status"] == "absent"


def test_host_memory_bandwidth_is_judged(deep_run):
    memory = checks(deep_run)["system.memory_bandwidth"]
    assert memory["status"] in ("PASS", "WARN", "FAIL"), memory["message"]
    assert memory["details"]["numpy"]["triad_gbps"] > 0
    assert "STREAM triad" in memory["message"]
    if memory["details"]["c_reference"] is not None:  # a C compiler on this machine
        assert memory["details"]["c_reference"]["triad_gbps"] > 0 and "compiled-C triad" in memory["message"]
