"""The SLURM gate on the fabric test's verdict: doctor_outcomes joins it to the doctor results registered in hostvars,
and the gate drains the isolated node with a hydra: reason that carries the proof."""

from ansible_collections.continuum.hydra.plugins.filter.doctor_outcomes import doctor_outcomes
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import MAX_REASON_CHARS, parse_show_node
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import slurm
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import fabric as planner
from ansible_collections.continuum.hydra.tests.support.fabric import SimulatedFabric, isolate

PASSING = {"schema_version": "1.2.0", "overall_status": "healthy",
           "checks": [{"id": "gpu.ecc_errors", "status": "PASS", "message": "ok", "details": {}, "remediation": None}]}


def _hostvars(state, done=True):
    plan = {"done": done, "fabric": planner.section(state), "checks": planner.host_checks(state)} if done else {"done": False}
    return {host: {"hydra_doctor": PASSING, "hydra_fabric_plan": plan} for host in state["hosts"]}


def test_the_isolated_host_fails_with_its_proof_and_a_rank_that_never_joined_is_error():
    state = isolate(SimulatedFabric(8, slow=(6,), noise=0, absent={1: ("n02",)}))
    outcomes = doctor_outcomes(_hostvars(state), state["hosts"])
    assert outcomes["n06"]["status"] == "failed" and outcomes["n06"]["failing_checks"] == ["fabric.collective"]
    assert outcomes["n06"]["proof"] == planner.proof_line(state, "n06")
    assert outcomes["n02"]["status"] == "error" and outcomes["n02"]["failing_checks"] == ["fabric.collective"]
    assert "proof" not in outcomes["n02"]
    assert {outcomes[h]["status"] for h in state["hosts"] if h not in ("n02", "n06")} == {"healthy"}


def test_without_a_finished_fabric_test_only_doctor_speaks():
    state = isolate(SimulatedFabric(8, slow=(6,), noise=0))
    outcomes = doctor_outcomes(_hostvars(state, done=False), state["hosts"])
    assert {o["status"] for o in outcomes.values()} == {"healthy"}


def test_the_gate_drains_the_isolated_node_naming_the_check_and_the_proof():
    state = isolate(SimulatedFabric(8, slow=(6,), noise=0))
    outcomes = doctor_outcomes(_hostvars(state), state["hosts"])
    nodes = parse_show_node("\n".join("NodeName=%s Arch=x86_64 State=IDLE ThreadsPerCore=1 Reason=" % h for h in state["hosts"]))
    plan = slurm.plan(outcomes, nodes)
    (drain,) = plan["drain"]
    assert drain["node"] == "n06"
    assert drain["reason"] == "hydra: fabric.collective %s" % planner.proof_line(state, "n06")
    assert len(drain["reason"]) <= MAX_REASON_CHARS


def test_a_long_proof_is_cut_to_the_reason_limit_and_the_ids_stay_whole():
    reason = slurm.drain_reason(["fabric.collective"], "rounds 1,2,3,4,5,6: " + "x" * 300)
    assert reason.startswith("hydra: fabric.collective rounds 1,2,3,4,5,6: xxx") and len(reason) == MAX_REASON_CHARS
    assert slurm.drain_reason(["gpu.ecc_errors"]) == "hydra: gpu.ecc_errors"
