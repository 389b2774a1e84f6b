#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: fleet_merge
short_description: Merge the parts of a sliced doctor run into one fleet report
version_added: 0.2.0
description:
  - Under AWX job slicing each slice of C(playbooks/doctor.yml) writes only its part,
    C(parts/<awx_workflow_job_id>/job-<awx_job_id>.json) under the report directory, and publishes a summary as
    the artifact C(hydra_fleet_part_<awx_job_id>). This merges the parts of one workflow, leaves the merged hosts in
    RV(merged_file) and returns the merged fleet's summary; the P(continuum.hydra.fleet_report#callback) callback
    then reads the file and writes the merged report in every format.
  - Every host of O(hosts) found in no part has the status V(missing) (never healthy). Parts of another workflow are
    ignored; a corrupt part is one line in RV(problems), not a failure. A job with a part file and an artifact uses
    the file (full details); an artifact alone gives host statuses and, for each failing or warning host, the ids
    of its failing and warning checks (at most 8 a host, no messages or details; see C(docs/awx.md)).
  - Runs on the controller (an action plugin). Usually run by C(playbooks/merge.yml); see C(docs/awx.md).
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads and merges, and writes only RV(merged_file) (for the callback, which removes it); the callback writes
        the report.
  diff_mode:
    support: none
options:
  workflow_job_id:
    description:
      - The AWX workflow job id the slices shared (their C(awx_workflow_job_id)).
      - Defaults to the id the slices' C(hydra_fleet_part_*) artifacts in O(parts) carry (one id, else an error naming
        them), then to this job's own C(awx_workflow_job_id). In an AWX workflow the merge node's own id is the outer
        workflow's, not the sliced one's, so the artifacts decide there.
    type: raw
  hosts:
    description: The full inventory (usually C(groups['all'])); those in no part are V(missing).
    type: list
    elements: str
    required: true
  parts:
    description: The slices' C(hydra_fleet_part_*) artifacts, by key (AWX passes them down as extra vars).
    type: dict
    default: {}
  report_dir:
    description:
      - Directory holding C(parts/). Defaults to the callback's own
        O(continuum.hydra.fleet_report#callback:report_dir) setting.
    type: path
"""

EXAMPLES = r"""
- name: Merge the slices of the workflow this job belongs to
  continuum.hydra.fleet_merge:
    workflow_job_id: "{{ awx_workflow_job_id }}"
    hosts: "{{ groups['all'] }}"
"""

RETURN = r"""
stats:
  description:
    - The merged fleet's summary for C(ansible.builtin.set_stats), as C(continuum.hydra.fleet_stats) gives it (without
      the analysis the callback adds).
  returned: success
  type: dict
  sample: {"hydra_fleet": {"ok": false, "totals": {"hosts": 6, "missing": 2}, "failing_hosts": ["n1", "n3", "n6"]}}
merged_file:
  description:
    - The merged hosts, left for the C(continuum.hydra.fleet_report) callback, which reads and removes the file. The
      hosts are not in the result - a result of many hosts cost Ansible about 27 ms and 220 KB a host.
  returned: success
  type: str
  sample: /srv/reports/parts/77/merged.jsonl
merge:
  description: The workflow id, the job ids merged, those only from artifacts, the parts ignored, the missing count.
  returned: success
  type: dict
  sample: {"workflow_job_id": "77", "jobs": ["101", "102"], "from_stats": [], "ignored": [], "missing": 2}
problems:
  description: One line per corrupt part, naming it.
  returned: success
  type: list
  elements: str
msg:
  description: One line saying what was merged.
  returned: always
  type: str
"""
