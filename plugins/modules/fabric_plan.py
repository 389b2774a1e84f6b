#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: fabric_plan
short_description: Judge the last round of the fabric test and plan the next one
version_added: 0.3.0
description:
  - Runs on the controller (an action plugin), once per round of C(playbooks/fabric.yml) (C(run_once)). Reads each
    host's rank result of the round just run from C(hostvars) (the variable O(result_var), registered by
    C(async_status)), judges each group, and plans the next round's groups, or says the test is done.
  - "Judging: a group passes when its bus bandwidth at the largest size reaches its floor and every rank's result was
    exact. The floor is C(fabric_busbw_gbps_min) in the hosts' C(hydra_expect) (the lowest among a group's members),
    else relative - (1 - O(relative_margin)) x the best group of the screening round (disjoint pairs at once)."
  - "Rounds (C(docs/fabric.md)): O(mode=bisect) starts with every host in one ring (with an absolute floor; without
    one, a screening round of pairs first), then splits the unproven hosts of every failing group in halves, tests the
    halves of all failing groups at once (a single host with a proven-good one), and probes the ring links of a failing
    group whose hosts all pass elsewhere. O(mode=pairwise) runs every pair once. A host is named when it is the only
    unproven member of O(confirmations) failing groups; one slow host of N is named within ceil(log2 N) + 2 rounds,
    two within ceil(log2 N) + 3."
  - A host whose rank did not join, was lost mid-collective or failed, and a host Ansible can no longer reach (not in
    O(live)), is in ERROR and left out of later rounds; the others are still judged.
  - "A host the idle guard found busy before the first round (the P(continuum.hydra.fabric#module) module's
    O(continuum.hydra.fabric#module:mode=idle) result in O(idle_var)) is left out of every round by choice: its checks
    are C(SKIP) naming what held it (C(not tested: node busy (...))), never C(PASS) nor C(ERROR), and the others are
    judged without it."
  - When done, returns the fleet report's C(fabric) section and each host's C(fabric.collective) and C(fabric.link)
    checks, which the P(continuum.hydra.fleet_report#callback) callback adds to the hosts' results.
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Plans and judges on the controller only; it changes nothing anywhere.
  diff_mode:
    support: none
options:
  hosts:
    description: The hosts under test, in ring order (usually C(ansible_play_hosts_all)); read at the first call only.
    type: list
    elements: str
    required: true
  live:
    description: The hosts Ansible still reaches (C(ansible_play_hosts)); the others are in ERROR as unreachable.
    type: list
    elements: str
  state:
    description: The RV(state) this task returned last round; none at the first call.
    type: dict
  result_var:
    description: The variable each host registered its rank's C(async_status) result in.
    type: str
    default: hydra_fabric_rank
  idle_var:
    description:
      - The variable each host registered its idle check in (the fabric module with O(continuum.hydra.fabric#module:mode=idle));
        read at the first call only. A live host without such a result is not confirmed idle and not tested.
      - Unset, no idle guard is applied (the hosts are taken as given).
    type: str
  mode:
    description: V(auto) is V(pairwise) up to O(pairwise_max) hosts, else V(bisect).
    type: str
    choices: [auto, bisect, pairwise]
    default: auto
  pairwise_max:
    description: The most hosts V(auto) tests pairwise.
    type: int
    default: 4
  relative_margin:
    description: Without an absolute floor, a group fails below (1 - this) x the reference group's bus bandwidth.
    type: float
    default: 0.25
  confirmations:
    description: Failing groups in which a host must be the only unproven member before it is named.
    type: int
    default: 2
  max_rounds:
    description: The most rounds; by default the two-slow-hosts bound plus two (or the pairwise schedule plus two).
    type: int
  port_dir:
    description: Directory on the hosts where rank 0 of each group writes its port file.
    type: path
    default: /tmp
seealso:
  - module: continuum.hydra.fabric
"""

EXAMPLES = r"""
- name: Confirm each host is idle (a GPU process or a SLURM job holding it leaves it out of the test)
  continuum.hydra.fabric:
    mode: idle
  register: hydra_fabric_idle

- name: Plan the first round
  continuum.hydra.fabric_plan:
    hosts: "{{ ansible_play_hosts_all }}"
    live: "{{ ansible_play_hosts }}"
    idle_var: hydra_fabric_idle
  run_once: true
  register: hydra_fabric_plan

- name: Judge the round just run and plan the next
  continuum.hydra.fabric_plan:
    hosts: "{{ ansible_play_hosts_all }}"
    live: "{{ ansible_play_hosts }}"
    state: "{{ hydra_fabric_plan.state }}"
  run_once: true
  register: hydra_fabric_plan
"""

RETURN = r"""
done:
  description: Whether the test is over (nothing left to plan, or O(max_rounds) reached).
  returned: always
  type: bool
round:
  description: The number of the round planned; null when done.
  returned: always
  type: int
stage:
  description: What the planned round does - V(whole), V(screen), V(half) (isolation), V(pair).
  returned: always
  type: str
max_rounds:
  description: The round bound of this test (the playbook's loop length).
  returned: always
  type: int
assignments:
  description:
    - Per host of the planned round - C(rank), C(world), C(group), C(run_id), C(token) (the group's secret),
      C(master) (rank 0's host), C(master_address), C(address) (where this host's rank binds), C(port_file).
  returned: always
  type: dict
masters:
  description: The hosts that are rank 0 of a group this round (launched first).
  returned: always
  type: list
  elements: str
state:
  description: The planner's state, to pass back as O(state) next round.
  returned: always
  type: dict
fabric:
  description:
    - The fleet report's C(fabric) section - C(mode), C(rounds) (each group's members, purpose, verdict, bus
      bandwidth, floor), C(isolated) (host, rounds, proof), C(links), C(errors), C(good), C(bounds), C(busy) (host and
      reason - not tested, the idle guard found it busy), C(forced) (host and reason - tested although busy).
  returned: when done
  type: dict
checks:
  description: Host name to its C(fabric.collective) and C(fabric.link) checks (id, status, message, details, remediation).
  returned: when done
  type: dict
"""
