#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: screen
short_description: Screen a SLURM node with doctor's deep level, as an exclusive SLURM job
version_added: 0.3.0
description:
  - Runs on the node itself (C(playbooks/screen.yml)). Submits C(sbatch --exclusive -w <node>) running the node-local
    health check's screen mode (C(hydra-healthcheck --mode screen), installed by the
    P(continuum.hydra.slurm_healthcheck#role) role), which runs doctor at level V(deep) inside the job and writes its
    result; waits for the job to start and to end; returns that result.
  - The job never runs under a user's job. SLURM starts it only when no other job holds the node, and inside it
    doctor's idle guard (check C(system.node_idle)) confirms the node is idle once more. A job that does not start
    within O(start_timeout) (the node stays busy), or cannot start (the node is drained or down, the partition closed),
    is cancelled and the node is reported not screened, never healthy.
  - The result has the shape of a P(continuum.hydra.doctor#module) result plus C(screen), so the
    P(continuum.hydra.fleet_report#callback) callback and the slurm_gate role read it like any doctor result; a node
    not screened has no C(checks), only C(screen) and C(msg). A job that ends without a result (killed at its time
    limit, a crash) is one C(ERROR) check C(screen.job) naming the job's state.
  - Runs on the node's Python 3.9+ with the standard library alone; needs C(sbatch), C(squeue), C(scontrol) and
    C(scancel) there. The job runs as the user the module runs as (use C(become) for checks that need root).
  - See C(docs/screening.md).
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Submits nothing; returns the node as not screened with the sbatch command line it would run.
  diff_mode:
    support: none
options:
  node:
    description: The node's SLURM name (C(sbatch -w)).
    type: str
    required: true
  program:
    description: The node-local health check the job runs (the slurm_healthcheck role's C(hydra-healthcheck) wrapper).
    type: path
    default: /usr/local/sbin/hydra-healthcheck
  level:
    description: The doctor level the job runs.
    type: str
    choices: [quick, standard, deep]
    default: deep
  partition:
    description: The partition to submit to (C(sbatch -p)); the cluster's default when empty.
    type: str
    default: ""
  time_limit:
    description:
      - The job's time limit in minutes (C(sbatch -t)). doctor's own deadline inside it ends a minute earlier, so the
        result is written before SLURM would kill the job.
    type: int
    default: 60
  start_timeout:
    description: Seconds the job may wait to start (the node busy with another job); then it is cancelled.
    type: float
    default: 600
  output_dir:
    description: Directory on the node where the job writes its result and its log (C(screen-<job id>.json), C(.log)).
    type: path
    default: /var/lib/continuum-hydra/screen
  sbatch_args:
    description: More C(sbatch) arguments (an account, a QOS, a reservation), each a list item.
    type: list
    elements: str
    default: []
  slurm_conf:
    description: Sets E(SLURM_CONF) for the SLURM commands, for a cluster whose configuration is elsewhere.
    type: path
  paths:
    description: Paths of C(sbatch), C(squeue), C(scontrol), C(scancel) where they are not on E(PATH).
    type: dict
    default: {}
seealso:
  - module: continuum.hydra.doctor
  - module: continuum.hydra.screen_plan
notes:
  - The task's own C(timeout) should exceed O(start_timeout) plus O(time_limit); C(playbooks/screen.yml) sets it with the
    P(continuum.hydra.task_timeout#filter) filter.
"""

EXAMPLES = r"""
- name: Screen this node with DCGM's and hydra's deep checks in an exclusive job on partition gpu
  continuum.hydra.screen:
    node: "{{ inventory_hostname_short }}"
    partition: gpu
    time_limit: 90
  register: hydra_doctor
"""

RETURN = r"""
screen:
  description:
    - The job. C(node), C(job_id), C(state) (its final SLURM state), C(submitted_at), C(started_at), C(ended_at), C(log)
      (the job's output on the node), C(exit_code), C(result) (the result file), C(screened) (false when the job
      never ran; C(reason) then says why), and C(judged) (false when the job gave no result, the C(screen.job) ERROR; screening
      coverage then keeps the node's last screen).
  returned: always
  type: dict
  sample: {"node": "node1", "job_id": "812", "state": "COMPLETED", "screened": true, "exit_code": 0,
           "submitted_at": "2026-11-26T21:30:00+00:00", "started_at": "2026-11-26T21:30:04+00:00",
           "ended_at": "2026-11-26T21:41:10+00:00", "log": "/var/lib/continuum-hydra/screen/screen-812.log",
           "result": "/var/lib/continuum-hydra/screen/screen-812.json"}
checks:
  description: The doctor result's checks (see P(continuum.hydra.doctor#module)), when the job ran.
  returned: when the job ran
  type: list
  elements: dict
summary:
  description: Number of checks per status.
  returned: when the job ran
  type: dict
overall_status:
  description: V(healthy), V(warning), V(error) or V(failed).
  returned: when the job ran
  type: str
  sample: healthy
environment:
  description: The node's facts as doctor reads them.
  returned: when the job ran and doctor produced a result
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels as _levels
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import screen as _screen


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="str", required=True),
            program=dict(type="path", default=_screen.DEFAULT_PROGRAM),
            level=dict(type="str", choices=list(_levels.LEVELS), default=_levels.DEEP),
            partition=dict(type="str", default=""),
            time_limit=dict(type="int", default=_screen.DEFAULT_TIME_LIMIT_MIN),
            start_timeout=dict(type="float", default=_screen.DEFAULT_START_TIMEOUT_S),
            output_dir=dict(type="path", default=_screen.DEFAULT_OUTPUT_DIR),
            sbatch_args=dict(type="list", elements="str", default=[]),
            slurm_conf=dict(type="path"),
            paths=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    try:
        result = _screen.run(module.params, check_mode=module.check_mode)
    except _screen.ScreenInputError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=bool(result["screen"].get("job_id")), **result)


if __name__ == "__main__":
    main()
