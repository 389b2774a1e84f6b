#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: findings_ack
short_description: Acknowledge (close) findings of the fleet report
version_added: 0.1.0
description:
  - The P(continuum.hydra.fleet_report#callback) callback keeps every WARN, FAIL and ERROR it saw as a finding in
    C(findings.json) beside its history, open until someone acknowledges it. This closes the open findings of the
    given hosts - of the given checks only, when O(checks) is set - recording who, when and why.
  - A finding seen again after it was closed reopens at the next report.
  - Runs on the controller (an action plugin), where the store is the callback's file, whatever host the task
    names. Usually run by C(playbooks/acknowledge.yml); see C(docs/fleet_report.md).
  - A host, or a check, with no finding at all in the store fails the task, naming it; findings already closed are
    left as they are (acknowledging twice changes nothing).
  - Reads, changes and writes the store under its lock (C(findings.json.lock)), so a doctor run ending meanwhile loses
    neither its update nor this acknowledgement. It waits for another holder at most the callback's
    O(continuum.hydra.fleet_report#callback:state_lock_timeout) seconds (E(HYDRA_STATE_LOCK_TIMEOUT), default 60), then
    fails with one line and changes nothing. A store that cannot be used (not JSON, a field of the wrong type) is set
    aside as the callback does and the task fails naming why.
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the store and returns the findings it would close; writes nothing.
  diff_mode:
    support: full
    details:
      - Each closed finding's open flag and acknowledgement, before and after.
options:
  hosts:
    description: Inventory names of the hosts whose findings are closed; at least one.
    type: list
    elements: str
    required: true
  checks:
    description: Check ids (C(gpu.ecc_errors)) to close; empty closes every open finding of the hosts.
    type: list
    elements: str
    default: []
  note:
    description: Why the findings are closed (what was done), kept with the acknowledgement.
    type: str
    default: ""
  by:
    description: Who acknowledges. Defaults to the user running the playbook on the controller.
    type: str
  history_dir:
    description:
      - Directory of the findings store. Defaults to the callback's own O(continuum.hydra.fleet_report#callback:history_dir)
        setting (E(HYDRA_HISTORY_DIR), C(ansible.cfg), else C(history) under its report directory).
    type: path
"""

EXAMPLES = r"""
- name: Close the ECC finding of gpu-node-07 after a GPU reset
  continuum.hydra.findings_ack:
    hosts: [gpu-node-07]
    checks: [gpu.ecc_errors]
    note: reset, looks fine

- name: Close every open finding of two hosts
  continuum.hydra.findings_ack:
    hosts: [gpu-node-07, gpu-node-08]
    note: node replaced
"""

RETURN = r"""
closed:
  description: The findings closed (or, in check mode, that would be), as stored, with their acknowledgement.
  returned: success
  type: list
  elements: dict
  sample: [{"host": "gpu-node-07", "check_id": "gpu.ecc_errors", "gpu_uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298",
            "gpu_index": 0, "status": "FAIL", "open": false, "times_seen": 2, "first_seen": "2026-11-20T08:00:00+00:00",
            "last_seen": "2026-11-21T08:00:00+00:00",
            "acknowledged": {"by": "ops", "at": "2026-11-21T09:12:00+00:00", "note": "reset, looks fine"}}]
store:
  description: The findings store that was read and written.
  returned: success
  type: str
  sample: ./reports/history/findings.json
msg:
  description: One line naming what was closed, or why nothing could be.
  returned: always
  type: str
  sample: "closed 1 finding: gpu-node-07 gpu.ecc_errors GPU 0 GPU-513536b6-7d19-9063-b049-1e69664bb298"
"""
