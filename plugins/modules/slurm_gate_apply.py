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
  - "The brake: when the plan would drain more than O(max_count) nodes, or more than O(max_fraction) of the judged
    nodes, the module fails before any change (no drain and no resume) and says why."
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
    description: Doctor outcomes that drain a node.
    type: list
    elements: str
    choices: [failed, error, warning]
    default: [failed, error]
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
  returned: always
  type: dict
  sample: {"drain": [{"node": "node3", "host": "gpu-c", "reason": "hydra: gpu.ecc_errors",
                      "why": "doctor failed: gpu.ecc_errors"}],
           "resume": [], "leave": [{"node": "node1", "host": "gpu-a", "why": "doctor healthy, in service (IDLE)"}],
           "brake": {"tripped": false, "why": null, "drain_count": 1, "node_count": 4, "max_count": 10,
                     "max_fraction": 0.25}}
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

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import slurm as _slurm

# After `state=resume` slurmctld reports IDLE+NOT_RESPONDING for about a second; the DRAIN flag is gone at once,
# but a few reads are allowed before calling the change unverified.
VERIFY_READS = 10
VERIFY_PAUSE_S = 0.5


class Gate:
    def __init__(self, module):
        self.module = module
        params = module.params
        self.scontrol = command.find_binary("scontrol", params["scontrol_path"])
        if not self.scontrol:
            module.fail_json(msg="scontrol: not found (%s); install the SLURM client or set scontrol_path"
                             % (params["scontrol_path"] or "not on PATH"))
        self.env = {"SLURM_CONF": params["slurm_conf"]} if params["slurm_conf"] else {}
        self.timeout = params["timeout"]

    def scontrol_call(self, args):
        argv = [self.scontrol] + args
        try:
            rc, out, err = command.run(argv, self.timeout, env=self.env)
        except (command.ProbeError, command.ProbeAbsent) as exc:
            self.module.fail_json(msg=str(exc))
        if rc != 0:
            self.module.fail_json(msg="%s failed (rc %d): %s" % (" ".join(argv), rc, (err or out).strip()), rc=rc)
        return out

    def read_nodes(self):
        return _slurm.parse_show_node(self.scontrol_call(["show", "node", "-o"]))


def diff_of(gate_plan, before, after):
    def view(nodes, node):
        state = nodes.get(node) or {}
        return {"state": state.get("state"), "reason": state.get("reason")}
    touched = [e["node"] for e in gate_plan["drain"] + gate_plan["resume"]]
    return {"before": dict((n, view(before, n)) for n in touched), "after": dict((n, view(after, n)) for n in touched)}


def predicted(gate_plan, before):
    after = dict((name, dict(state)) for name, state in before.items())
    for entry in gate_plan["drain"]:
        after[entry["node"]].update(state=after[entry["node"]]["state"] + "+DRAIN", drained=True, reason=entry["reason"])
    for entry in gate_plan["resume"]:
        base = after[entry["node"]]["state"].split("+")[0]
        after[entry["node"]].update(state=base, drained=False, reason=None)
    return after


def main():
    module = AnsibleModule(
        argument_spec=dict(
            outcomes=dict(type="dict", required=True),
            drain_on=dict(type="list", elements="str", choices=["failed", "error", "warning"], default=["failed", "error"]),
            unreachable=dict(type="str", choices=["ignore", "drain"], default="ignore"),
            max_fraction=dict(type="float", default=0.25),
            max_count=dict(type="int", default=10),
            node_names=dict(type="dict", default={}),
            scontrol_path=dict(type="path"),
            slurm_conf=dict(type="path"),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["slurm_conf"] and not os.path.isfile(params["slurm_conf"]):
        module.fail_json(msg="slurm_conf: %s is not a file" % params["slurm_conf"])
    policy = dict((k, params[k]) for k in ("drain_on", "unreachable", "max_fraction", "max_count", "node_names"))
    gate = Gate(module)
    before = gate.read_nodes()
    try:
        gate_plan = _slurm.plan(params["outcomes"], before, policy)
    except _slurm.GateInputError as exc:
        module.fail_json(msg=str(exc))
    lines = _slurm.plan_lines(gate_plan)
    if gate_plan["brake"]["tripped"]:
        module.fail_json(msg="slurm_gate brake: %s; nothing was changed" % gate_plan["brake"]["why"],
                         plan=gate_plan, plan_lines=lines, changed=False)
    changed = bool(gate_plan["drain"] or gate_plan["resume"])
    if module.check_mode or not changed:
        module.exit_json(changed=changed, plan=gate_plan, plan_lines=lines, nodes=before,
                         diff=diff_of(gate_plan, before, predicted(gate_plan, before)))

    for entry in gate_plan["drain"]:
        gate.scontrol_call(_slurm.drain_args(entry["node"], entry["reason"]))
    for entry in gate_plan["resume"]:
        gate.scontrol_call(_slurm.resume_args(entry["node"]))

    for _attempt in range(VERIFY_READS):
        after = gate.read_nodes()
        problems = _slurm.unverified(gate_plan, after)
        if not problems:
            break
        time.sleep(VERIFY_PAUSE_S)
    result = dict(changed=True, plan=gate_plan, plan_lines=lines, nodes=after, diff=diff_of(gate_plan, before, after))
    if problems:
        module.fail_json(msg="slurm_gate: changes not verified: %s" % "; ".join("%s %s" % p for p in problems), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
