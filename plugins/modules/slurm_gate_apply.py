#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: slurm_gate_apply
short_description: Drain the SLURM nodes doctor failed and resume the ones hydra drained that now pass
version_added: 0.1.0
description:
  - Runs on the SLURM controller host (or any host where C(scontrol) talks to slurmctld). Reads every node's state and
    drain reason with C(scontrol show node -o), plans from the doctor outcomes it is given, judges the brake, then
    drains and resumes with C(scontrol update) and reads the states back to verify.
  - "A node is drained with the reason C(hydra: <failing check ids>). A node is resumed only when it passes and its
    drain reason starts with C(hydra:); a drain an admin set is never resumed."
  - "Each node is read again right before its change: a node an admin drained since the plan is neither resumed nor
    drained over (its reason is kept), and a node is resumed only while it still has the very C(hydra:) reason the
    plan saw. Such a node moves to C(plan.leave) with why."
  - "The brake: when the plan would drain more than O(max_count) nodes, or more than O(max_fraction) of the judged
    nodes, the module fails before any change (no drain and no resume) and says why."
  - "The circuit breaker: when more than O(breaker_share) of the judged nodes (and at least O(breaker_min_nodes))
    could not be judged (V(error) or V(unreachable)), or fail the same check, the checker is suspect rather than the
    nodes: nothing is drained (each such node is in C(plan.leave) saying why), nodes that pass are still resumed, and
    the task does not fail. C(plan.breaker) says what tripped it."
  - Usually called by the P(continuum.hydra.slurm_gate#role) role; see C(docs/slurm_gate.md).
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the node states and returns the plan; changes nothing.
  diff_mode:
    support: full
    details:
      - Before and after state and reason of every node the plan drains or resumes.
options:
  outcomes:
    description:
      - Doctor outcome per inventory host, usually from the P(continuum.hydra.doctor_outcomes#filter) filter.
      - Each value is a dict with C(status) (V(healthy), V(warning), V(failed), V(error), V(unreachable) or V(unknown)),
        C(failing_checks) (list of check ids) and C(message).
    type: dict
    required: true
  drain_on:
    description:
      - Doctor outcomes that drain a node. V(error) means doctor could not judge the node (a probe failed or timed
        out); that is a checker outage as often as a fault, so it drains only when listed here. Listed or not, an
        V(error) node is never resumed; a drain hydra wrote stays until doctor can judge the node again.
    type: list
    elements: str
    choices: [failed, error, warning]
    default: [failed]
  unreachable:
    description:
      - "What to do with a node doctor could not reach. V(ignore) leaves its state as it is; V(drain) drains it with
        the reason C(hydra: unreachable) (it is resumed by a later run that reaches it and finds it passing)."
    type: str
    choices: [ignore, drain]
    default: ignore
  max_fraction:
    description: Brake; the largest fraction (0 to 1) of the judged nodes one run may drain.
    type: float
    default: 0.25
  max_count:
    description: Brake; the largest number of nodes one run may drain.
    type: int
    default: 10
  breaker_share:
    description:
      - Circuit breaker; the share (above 0, at most 1) of the judged nodes that, could they not be judged or fail the
        same check, makes the gate drain nothing this run. V(1) turns it off.
    type: float
    default: 0.5
  breaker_min_nodes:
    description: Circuit breaker; the fewest nodes that trip it (fewer, whatever their share, never do).
    type: int
    default: 3
  node_names:
    description: SLURM node name per inventory host, for hosts whose inventory name is not their SLURM name.
    type: dict
    default: {}
  scontrol_path:
    description: The C(scontrol) binary; looked up on E(PATH) by default.
    type: path
  slurm_conf:
    description: Sets E(SLURM_CONF) for C(scontrol), for a cluster whose configuration is not C(/etc/slurm/slurm.conf).
    type: path
  timeout:
    description: Seconds each C(scontrol) call may take.
    type: int
    default: 30
seealso:
  - module: continuum.hydra.doctor
  - plugin: continuum.hydra.doctor_outcomes
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Drain the failing nodes of the partition, resume the recovered ones
  continuum.hydra.slurm_gate_apply:
    outcomes: "{{ hostvars | continuum.hydra.doctor_outcomes(groups['gpu_partition']) }}"
    max_fraction: 0.2
    max_count: 5

- name: Preview only, with the inventory names mapped to SLURM names
  continuum.hydra.slurm_gate_apply:
    outcomes: "{{ lookup('ansible.builtin.file', 'reports/fleet-report.json') | from_json | continuum.hydra.doctor_outcomes }}"
    node_names:
      gpu-a01.example.com: a01
  check_mode: true
"""

RETURN = r"""
plan:
  description:
    - What the gate does (or, in check mode or when the brake trips, would do). C(drain) and C(resume) entries have
      C(node), C(host), C(reason) and C(why); C(leave) entries have C(node), C(host) and C(why).
    - C(brake) has C(tripped), C(why), C(drain_count), C(node_count), C(max_count) and C(max_fraction).
    - C(breaker) has C(tripped), C(why), C(share), C(min_nodes), C(node_count), C(unjudged) (the hosts that could not be
      judged), C(check_id) (the check most nodes fail, when that tripped it) and C(hosts) (the hosts that tripped it).
  returned: always
  type: dict
  sample: {"drain": [{"node": "node3", "host": "gpu-c", "reason": "hydra: gpu.ecc_errors",
                      "why": "doctor failed: gpu.ecc_errors"}],
           "resume": [], "leave": [{"node": "node1", "host": "gpu-a", "why": "doctor healthy, in service (IDLE)"}],
           "brake": {"tripped": false, "why": null, "drain_count": 1, "node_count": 4, "max_count": 10,
                     "max_fraction": 0.25},
           "breaker": {"tripped": false, "why": null, "share": 0.5, "min_nodes": 3, "node_count": 4, "unjudged": [],
                       "check_id": null, "hosts": []}}
plan_lines:
  description: The plan as one readable line per node (the brake first when it trips).
  returned: always
  type: list
  elements: str
  sample: ["drain  node3 (gpu-c): doctor failed: gpu.ecc_errors -> reason 'hydra: gpu.ecc_errors'"]
nodes:
  description: State, flags, drained and reason of every SLURM node, read after the changes (before, in check mode).
  returned: success
  type: dict
  sample: {"node3": {"state": "IDLE+DRAIN", "flags": ["DRAIN"], "drained": true, "reason": "hydra: gpu.ecc_errors"}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import slurm as _slurm


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            outcomes=dict(type="dict", required=True),
            drain_on=dict(type="list", elements="str", choices=list(_slurm.DRAINABLE_OUTCOMES),
                          default=list(_slurm.DEFAULT_POLICY["drain_on"])),
            unreachable=dict(type="str", choices=list(_slurm.UNREACHABLE_POLICIES), default=_slurm.DEFAULT_POLICY[_slurm.UNREACHABLE]),
            max_fraction=dict(type="float", default=_slurm.DEFAULT_POLICY["max_fraction"]),
            max_count=dict(type="int", default=_slurm.DEFAULT_POLICY["max_count"]),
            breaker_share=dict(type="float", default=_slurm.DEFAULT_POLICY["breaker_share"]),
            breaker_min_nodes=dict(type="int", default=_slurm.DEFAULT_POLICY["breaker_min_nodes"]),
            node_names=dict(type="dict", default={}),
            scontrol_path=dict(type="path"),
            slurm_conf=dict(type="path"),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    apply.run(module, _slurm.SlurmGateWorker)


if __name__ == "__main__":
    main()
