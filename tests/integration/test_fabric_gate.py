"""playbooks/validate_partition.yml with hydra_fabric=true on real SSH hosts and a real SLURM cluster: the node the
fabric test isolates is drained with a hydra: reason that names the check and the proof; the others stay in service.

Four network-namespace hosts (node1..node4, tests/support/netns.py) are the partition's nodes, with slurmd nodes of
the same names (tests/support/slurm_cluster.py); node3's link is shaped to 20 Mbit/s. Doctor reads only a recorded
nvidia-smi (gpu.ecc_errors passes everywhere), so the fabric verdict alone decides.
"""

import os
import sys

import pytest
import yaml

from ansible_collections.continuum.hydra.tests.support import fabric as F
from ansible_collections.continuum.hydra.tests.support import netns, slurm_cluster
from ansible_collections.continuum.hydra.tests.support.fleet import fixture, write_host_bin
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

pytestmark = pytest.mark.integration

PLAYBOOK = os.path.join(REPO, "playbooks", "validate_partition.yml")
NODES = ["node1", "node2", "node3", "node4"]


def test_the_isolated_node_is_drained_with_the_proof_in_its_reason(tmp_path):
    with slurm_cluster.running_cluster(str(tmp_path / "slurm"), len(NODES)) as conf, netns.beds(tmp_path) as make:
        bed = make(len(NODES))
        bed.shape("node3", 20)
        a100 = fixture("a100-sxm4-v12.xml")
        host_vars = {h: {"hydra_environment": {"PATH": "%s:/usr/bin:/bin" % write_host_bin(str(tmp_path / "bins"), h, a100)}}
                     for h in NODES}
        flat = yaml.safe_load(bed.inventory(tmp_path / "bed.yml", host_vars=host_vars).read_text())["all"]
        inventory = {"all": {"vars": flat["vars"], "children": {
            "slurm_nodes": {"hosts": flat["hosts"]},
            "slurm_controller": {"hosts": {"slurm-head": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}},
        }}}
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
        extra = {"hydra_fabric": True, "hydra_only": ["gpu.ecc_errors"], "slurm_gate_slurm_conf": conf,
                 "hydra_expect": {"fabric_busbw_gbps_min": 0.02}, "fabric_sizes": [8, 262144], "fabric_iterations": 3,
                 "fabric_timeouts": {"join": 40, "step": 10, "run": 120}}
        proc, report, killed = F.run_fabric(tmp_path / "inventory.yml", tmp_path / "reports", extra_vars=extra, timeout=600,
                                            playbook=PLAYBOOK)
        assert not killed and proc.returncode == 0, proc.stdout[-4000:]
        proof = next(item["proof"] for item in report["fabric"]["isolated"] if item["host"] == "node3")
        states = slurm_cluster.node_states(conf)
        assert states["node3"] == (True, "hydra: fabric.collective %s" % proof)
        assert {n: s[0] for n, s in states.items()} == {"node1": False, "node2": False, "node3": True, "node4": False}
        assert report["hosts"]["node3"]["failing_checks"] == ["fabric.collective"]
        assert [c["id"] for c in report["hosts"]["node1"]["doctor"]["checks"]] == ["gpu.ecc_errors", "fabric.collective", "fabric.link"]
