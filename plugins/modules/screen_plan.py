#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: screen_plan
short_description: Choose the SLURM nodes to screen this run, those screened longest ago first
version_added: 0.3.0
description:
  - Reads when each of O(hosts) was last screened (C(screening.json) beside the
    P(continuum.hydra.fleet_report#callback) callback's history, which the callback updates at the end of every
    C(playbooks/screen.yml) run) and returns the at most O(max_nodes) to screen now - the nodes never screened first,
    then those screened longest ago - and how many were overdue (not screened within O(max_age_days)) before this run.
  - Runs on the controller (an action plugin), whatever host the task names; it changes nothing. The
    P(continuum.hydra.fleet_report#callback) callback reads the plan's O(hosts) from its result for the report's
    coverage. A store that cannot be read is a problem line and the nodes are chosen as if none was ever screened.
  - Usually run by C(playbooks/screen.yml); see C(docs/screening.md).
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads only; the same in check mode.
  diff_mode:
    support: none
options:
  hosts:
    description: The inventory hosts that are the nodes to screen in turn (the candidates).
    type: list
    elements: str
    required: true
  max_nodes:
    description: The most nodes screened this run (K).
    type: int
    default: 10
  max_age_days:
    description: Every node should be screened within this many days (N); older ones are overdue in the report.
    type: float
    default: 7
  history_dir:
    description: Where the store is; by default the callback's O(continuum.hydra.fleet_report#callback:history_dir).
    type: path
seealso:
  - module: continuum.hydra.screen
"""

EXAMPLES = r"""
- name: Choose the 20 nodes screened longest ago
  continuum.hydra.screen_plan:
    hosts: "{{ ansible_play_hosts_all }}"
    max_nodes: 20
  run_once: true
  register: hydra_screen_plan
"""

RETURN = r"""
chosen:
  description: The hosts to screen this run, in order.
  returned: success
  type: list
  elements: str
  sample: ["gpu-b07", "gpu-a01"]
order:
  description: Every candidate with its C(last_screened) time (null when never), in screening order.
  returned: success
  type: list
  elements: dict
  sample: [{"host": "gpu-b07", "last_screened": null}, {"host": "gpu-a01", "last_screened": "2026-11-19T02:10:00+00:00"}]
screen_plan:
  description: C(candidates), C(chosen), C(max_nodes), C(max_age_days), as the fleet report records them.
  returned: success
  type: dict
store:
  description: The store read.
  returned: success
  type: str
  sample: ./reports/history/screening.json
problems:
  description: One line when the store could not be read.
  returned: success
  type: list
  elements: str
msg:
  description: One line naming the nodes chosen and the coverage before this run.
  returned: always
  type: str
"""
