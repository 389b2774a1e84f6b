#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: cgroup_limits_apply
short_description: Limit the memory, CPU and I/O of named processes, users or slices with cgroups
version_added: 0.1.0
description:
  - Writes cgroup v2 limits (C(memory.max), C(memory.high), C(cpu.max), C(io.max) per device) on hosts with the
    unified hierarchy, and the v1 equivalents (C(memory.limit_in_bytes), C(memory.soft_limit_in_bytes),
    C(cpu.cfs_quota_us), C(blkio.throttle.*)) on v1 hosts, under a configurable cgroup root.
  - Each entry of O(limits) limits either a group hydra creates under O(parent) (O(limits[].name)), into which the named
    processes, the processes of the named users and the listed PIDs are moved, or an existing cgroup such as a systemd
    slice, limited in place (O(limits[].cgroup)).
  - As Cluster-Helper's tier 1, O(noisy_processes) (the processes a doctor check found, with a severity) are moved into
    C(<parent>/noisy-warn) or C(<parent>/noisy-fail) with the limits O(severity_limits) gives each severity.
  - Only values that differ are written; everything written is read back to verify. Processes are moved once.
  - Usually called by the P(continuum.hydra.cgroup_limits#role) role; see C(docs/remediation.md).
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the cgroup files and returns the writes it would make; creates and writes nothing.
  diff_mode:
    support: full
    details:
      - Each cgroup file's value before and after, and the PIDs moved.
options:
  root:
    description: The cgroup root (the cgroup2 mount on v2 hosts, the directory of the per-controller mounts on v1).
    type: path
    default: /sys/fs/cgroup
  version:
    description: cgroup version; V(auto) detects it from O(root).
    type: str
    choices: [auto, v1, v2]
    default: auto
  parent:
    description: Where the groups named in O(limits[].name) are created, relative to O(root).
    type: str
    default: hydra.slice
  limits:
    description: The groups to limit.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: A group hydra creates (and moves processes into) under O(parent). Exclusive with O(limits[].cgroup).
        type: str
      cgroup:
        description: An existing cgroup, relative to O(root) (under v1, to each controller's mount), limited in place.
        type: str
      processes:
        description: Process names (as in C(/proc/PID/comm)) to move into the group.
        type: list
        elements: str
      pids:
        description: PIDs to move into the group.
        type: list
        elements: int
      users:
        description: Users (names or UIDs) whose processes are moved into the group.
        type: list
        elements: str
      memory_max:
        description: Hard memory limit; bytes or a size such as V(8G), or V(max).
        type: str
      memory_high:
        description: Memory throttling threshold (v2 C(memory.high); v1 soft limit); bytes, a size or V(max).
        type: str
      cpu_percent:
        description: CPU limit in percent of one CPU (V(200) is two CPUs) over a 100 ms period, or V(max) for none.
        type: str
      io_max:
        description: I/O limits per device; C(device) is C(MAJ:MIN) or a block device path, then any of C(rbps),
          C(wbps) (bytes per second), C(riops), C(wiops) (operations per second), each a number or V(max).
        type: list
        elements: dict
  noisy_processes:
    description: Processes a check found, each C({pid, name, severity}) with severity V(warn) or V(fail).
    type: list
    elements: dict
    default: []
  severity_limits:
    description: Limits (the keys of a O(limits) entry) per severity, for O(noisy_processes).
    type: dict
    default: {}
seealso:
  - module: continuum.hydra.doctor
"""

EXAMPLES = r"""
- name: Cap a runaway data loader and one user's shell jobs
  continuum.hydra.cgroup_limits_apply:
    limits:
      - name: loader
        processes: [data_loader]
        memory_max: 16G
        cpu_percent: 400
        io_max:
          - device: /dev/nvme0n1
            rbps: 524288000
      - cgroup: user.slice/user-1001.slice
        memory_high: 32G

- name: Tier 1, limits scaled by severity for the noisy processes a check found
  continuum.hydra.cgroup_limits_apply:
    noisy_processes:
      - {pid: 4242, name: rsync, severity: fail}
      - {pid: 5151, name: tar, severity: warn}
    severity_limits:
      warn: {cpu_percent: 100, memory_high: 8G}
      fail: {cpu_percent: 25, memory_max: 2G}
"""

RETURN = r"""
version:
  description: The cgroup version used.
  returned: always
  type: str
  sample: v2
changes:
  description: Each action taken (in check mode, to be taken) - C(mkdir), C(write) of a file with its value before and
    after, or C(move) of PIDs - with the path relative to O(root).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "write", "path": "hydra.slice/loader/memory.max", "before": "max", "after": 17179869184}]
groups:
  description: Per group, its path relative to O(root) and the PIDs it holds that the entry asked for.
  returned: always
  type: list
  elements: dict
  sample: [{"cgroup": "hydra.slice/loader", "pids": [4242]}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import cgroups as _cgroups


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/sys/fs/cgroup"),
            version=dict(type="str", choices=["auto", _cgroups.V1, _cgroups.V2], default="auto"),
            parent=dict(type="str", default="hydra.slice"),
            limits=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str"), cgroup=dict(type="str"), processes=dict(type="list", elements="str"),
                pids=dict(type="list", elements="int"), users=dict(type="list", elements="str"),
                memory_max=dict(type="str"), memory_high=dict(type="str"), cpu_percent=dict(type="str"),
                io_max=dict(type="list", elements="dict"))),
            noisy_processes=dict(type="list", elements="dict", default=[]),
            severity_limits=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    apply.run(module, _cgroups.CgroupLimitsWorker)


if __name__ == "__main__":
    main()
