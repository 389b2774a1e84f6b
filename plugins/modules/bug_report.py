#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: bug_report
short_description: Take the GPU vendor's report of a node and fetch it beside the fleet report's evidence
version_added: 0.3.0
description:
  - Runs the vendor's report on the target, bounded in time (O(timeout)) and size (O(max_bytes)), then fetches it to
    the controller as C(evidence/<host>/<file>) under the P(continuum.hydra.fleet_report#callback) callback's
    C(report_dir), where the evidence files of failing GPUs are; the fleet report names it in C(bug_reports).
  - NVIDIA - C(nvidia-bug-report.sh --output-file <dir>/nvidia-bug-report-<time>.log), which writes C(.log.gz).
    AMD (no C(nvidia-bug-report.sh)) - C(amd-smi static), C(metric), C(bad-pages) and C(firmware) as JSON, gathered into
    one C(amd-smi-report-<time>.log.gz).
  - Past O(timeout) the tool and everything it started are killed and the task fails saying so; a report larger than
    O(max_bytes) is removed on the node, not fetched. The node's copy of a fetched report stays in O(output_dir).
  - The slurm_gate role runs it on each node it is about to drain when C(slurm_gate_collect_evidence) is on, before the
    drain (C(docs/slurm_gate.md)). An action plugin with its module - the module runs on the target with the standard
    library alone.
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
options:
  host:
    description: The inventory name the evidence is filed under (C(evidence/<host>/)); the task's host by default.
    type: str
  output_dir:
    description: Where the report is written on the node.
    type: path
    default: /var/lib/continuum-hydra/evidence
  timeout:
    description: Seconds the whole collection may take.
    type: int
    default: 300
  max_bytes:
    description: The largest report fetched; a larger one is removed on the node.
    type: int
    default: 268435456
  nvidia_bug_report_path:
    description: C(nvidia-bug-report.sh) where it is not on E(PATH).
    type: path
  amd_smi_path:
    description: C(amd-smi) where it is not on E(PATH), E(ROCM_PATH)/bin or C(/opt/rocm/bin).
    type: path
  report_dir:
    description: Where the evidence goes on the controller; by default the callback's C(report_dir).
    type: path
seealso:
  - module: continuum.hydra.slurm_gate_apply
"""

EXAMPLES = r"""
- name: Take and fetch the vendor's report of a node about to be drained
  continuum.hydra.bug_report:
    host: "{{ item.host }}"
    timeout: 600
  delegate_to: "{{ item.host }}"
  loop: "{{ preview.plan.drain }}"
"""

RETURN = r"""
path:
  description: The fetched report, relative to the controller's report directory.
  returned: success
  type: str
  sample: evidence/gpu-c/nvidia-bug-report-20261126T213000Z.log.gz
remote_path:
  description: The report on the node.
  returned: success
  type: str
  sample: /var/lib/continuum-hydra/evidence/nvidia-bug-report-20261126T213000Z.log.gz
bytes:
  description: Its size.
  returned: success
  type: int
  sample: 4812331
tool:
  description: The tool that wrote it.
  returned: success
  type: str
  sample: /usr/bin/nvidia-bug-report.sh
problems:
  description: AMD only - the amd-smi subcommands that failed or did not run before the deadline (the rest were taken).
  returned: when amd-smi wrote the report
  type: list
  elements: str
  sample: ["bad-pages: rc 2"]
seconds:
  description: How long the collection took on the node.
  returned: success
  type: float
  sample: 84.2
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import bug_report as _bug_report


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str"),
            output_dir=dict(type="path", default=_bug_report.DEFAULT_OUTPUT_DIR),
            timeout=dict(type="int", default=_bug_report.DEFAULT_TIMEOUT_S),
            max_bytes=dict(type="int", default=_bug_report.DEFAULT_MAX_BYTES),
            nvidia_bug_report_path=dict(type="path"),
            amd_smi_path=dict(type="path"),
            report_dir=dict(type="path"),
        ),
        supports_check_mode=False,
    )
    try:
        found = _bug_report.collect(module.params)
    except _bug_report.EvidenceError as exc:
        module.fail_json(msg="no vendor report: %s" % exc)
    module.exit_json(changed=True, remote_path=found.pop("path"), **found)


if __name__ == "__main__":
    main()
