#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: doctor
short_description: Health and configuration checks of a GPU/ML host
version_added: 0.1.0
description:
  - Reads the host (one C(nvidia-smi -q -x) per run, NVML when C(pynvml) is importable, C(/proc), C(/sys),
    the kernel log and a PyTorch subprocess) and judges it with the checks of the catalogue in C(docs/checks.md).
  - Every check has a stable dotted id and a status C(PASS), C(WARN), C(FAIL), C(SKIP) or C(ERROR). A check that cannot
    run is C(SKIP) with the reason; a probe that fails or times out makes its checks C(ERROR), never C(PASS).
  - The module never modifies the host, but for the state file of check C(tenant.slo) under O(state_dir) (not written in
    check mode) and its own compiled code, kept per user under C(~/.cache/continuum-hydra/bytecode) (C($XDG_CACHE_HOME))
    so that later runs do not compile it again; C(PYTHONDONTWRITEBYTECODE=1) in the task's environment turns that off
    (C(docs/performance.md)). By default a C(FAIL) does not fail the task, so the
    P(continuum.hydra.fleet_report#callback) callback sees every host.
  - Runs on the target's Python 3.9+ with the standard library alone.
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
  - continuum.hydra._attributes.INFO_MODULE
options:
  only:
    description:
      - Run only the checks whose id equals, or starts with, one of these (for example V(gpu) or V(gpu.ecc_errors)).
      - A value that selects no check is an error.
    type: list
    elements: str
    default: []
  exclude:
    description:
      - Skip the checks whose id equals, or starts with, one of these. Applied after O(only).
    type: list
    elements: str
    default: []
  level:
    description:
      - How much the run may cost the host (C(docs/levels.md)). Each check has a level (RV(catalogue) shows it); a run
        at a level runs the checks at or below it, and the checks above it are absent from the result.
      - V(quick) is prolog-safe, seconds, no load on the GPUs, one C(nvidia-smi) call, C(/proc) and C(/sys) reads;
        no kernel log, NVML, PyTorch, NVLink, Fabric Manager, time sync or nvcc checks.
      - V(standard) adds those (still passive).
      - V(deep) adds active checks that load the GPUs for minutes, C(dcgmi diag) (DCGM) and C(rvs) (ROCm Validation
        Suite) where installed; unless O(timeouts.total) is given, a deep run's deadline is 300 s plus
        O(timeouts.dcgm_diag) and O(timeouts.rvs).
      - "At V(deep) the idle guard (check C(system.node_idle)) reads the node first: while a GPU compute process runs
        or a SLURM job holds the node, the active checks are not run and C(SKIP) naming it (see O(force), O(slurm_node),
        C(docs/screening.md))."
      - O(only) naming nothing but checks above the level is an error that names the level they need.
    type: str
    choices: [quick, standard, deep]
    default: standard
  list_checks:
    description:
      - Return the catalogue in RV(catalogue) without reading the host.
    type: bool
    default: false
  expect:
    description:
      - What this host should look like, usually C({{ hydra_expect }}) from inventory group variables.
      - "Keys: C(gpu_model) (substring of the product name), C(gpu_count), C(driver_min), C(driver_max),
        C(pcie_gen), C(pcie_width), C(ecc_mode) (V(enabled)/V(disabled)), C(mig_mode), C(persistence_mode),
        C(ecc_correctable_warn), C(temperature_warn_c), C(xid_window_hours), C(disk_paths), C(disk_min_free_gb),
        C(dev_shm_min_gb) and the other thresholds listed in C(docs/checks.md)."
      - With none given, checks judge against the hardware's own maxima.
    type: dict
    default: {}
  timeouts:
    description:
      - Deadlines in seconds. Every command and every read that can block (files in home directories and on
        network mounts, C(statvfs)) has one, and every probe runs under the run's deadline O(timeouts.total)
        (which also bounds C(/sys) reads of a dead device); a probe past its deadline makes its checks C(ERROR)
        naming the timeout, and a command's whole process tree (setsid'd grandchildren included) is killed.
      - Per-probe timeouts are capped by the time left to O(timeouts.total).
    type: dict
    default: {}
    suboptions:
      nvidia_smi:
        description:
          - The one C(nvidia-smi -q -x) call of the run, C(nvidia-smi nvlink --status) and each NVML session.
            When C(nvidia-smi -q -x) fails or times out, no other nvidia-smi or NVML call is made for NVLink,
            so a hung driver costs this timeout once. Default 30.
        type: float
      kernel_log:
        description:
          - Reading the kernel log (C(journalctl -k), then C(dmesg)). Default 15.
        type: float
      torch:
        description:
          - The PyTorch subprocess. Default 90.
        type: float
      command:
        description:
          - Any other command (C(timedatectl), C(chronyc), C(systemctl), C(nvcc --version)) and each bounded read
            (C(~/.nccl.conf) and C(/etc/nccl.conf), C(statvfs) of C(/dev/shm) and the disk paths). Default 10.
        type: float
      dcgm_diag:
        description:
          - C(dcgmi diag -r N -j) (level V(deep)). Default by C(dcgm_diag_level) in O(expect) (V(2) unless set),
            120 for 1, 600 for 2, 2700 for 3, 7200 for 4.
        type: float
      rvs:
        description:
          - C(rvs -r N) or C(rvs -c FILE) (level V(deep)). Default 1800.
        type: float
      active:
        description:
          - Each of level V(deep)'s own active probes (the GPU measurements in one torch worker, the host memory
            triad with its compiled C reference). Default 240.
        type: float
      total:
        description:
          - "Deadline of the whole run (level V(deep): 300 plus O(timeouts.dcgm_diag), O(timeouts.rvs) and O(timeouts.active) unless given).
            No probe starts after it, a probe still running is abandoned a few seconds after it (its commands are killed),
            and the checks not yet run are C(ERROR) with the message C(not run: doctor deadline (timeouts.total=Ns));
            the module still returns its result."
          - The default, 300, is well under the limits an Ansible task usually runs under (job timeouts of
            AWX/CI, async windows, an operator waiting on one play step), so a hung host yields a result and the fleet report is written
            instead of the task being killed with nothing to show. It exceeds the sum of the per-probe defaults on a
            healthy host by far.
        type: float
  fail_on:
    description:
      - When the task itself fails. V(never) reports only; V(fail) fails on a C(FAIL) or C(ERROR) check;
        V(warn) also on a C(WARN).
    type: str
    choices: [never, fail, warn]
    default: never
  deterministic:
    description:
      - Sort the checks by id and leave out timings and the timestamp, so two results of an unchanged host diff clean.
    type: bool
    default: false
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) binary. By default it is looked up on E(PATH).
    type: path
  state_dir:
    description:
      - Directory of the state kept across runs, C(tenants.json) of check C(tenant.slo) (each tenant's SLO state;
        C(docs/tenant-slos.md)), written atomically after the checks are judged. The tenant_guard role keeps its state
        in the same file, so doctor and the guard agree.
      - Check C(slurm.healthcheck) reads the node-local health check's last result from C(<state_dir>/healthcheck/last.json),
        where the slurm_healthcheck role (its C(slurm_healthcheck_state_dir)) has it written.
    type: path
    default: /var/lib/continuum-hydra
  slurm_node:
    description:
      - The node's SLURM name, for the idle guard's C(squeue -w) (level V(deep)). Defaults to E(SLURMD_NODENAME), else
        the short host name. A node C(squeue) does not know makes the guard C(ERROR) and the active checks are not run.
    type: str
  force:
    description:
      - Run level V(deep)'s active checks even on a node the idle guard finds busy (or cannot read); check
        C(system.node_idle) is then C(WARN) naming what occupied the node. It loads a user's job; use it on a node you own.
    type: bool
    default: false
  torch_python:
    description:
      - Python interpreter whose PyTorch the C(pytorch.*), C(nccl.torch_backend), C(cuda.*) (but C(cuda.driver_version)),
        C(gpu.device_properties) and C(environment.venv) checks judge (for example a training virtualenv).
        Defaults to the interpreter running the module.
    type: path
seealso:
  - plugin: continuum.hydra.fleet_report
    plugin_type: callback
notes:
  - The catalogue, with what each check reads and its PASS/WARN/FAIL rule, is C(docs/checks.md) in the collection.
"""

EXAMPLES = r"""
- name: Check a GPU host against its group's expectations
  continuum.hydra.doctor:
    expect: "{{ hydra_expect | default({}) }}"

- name: Only the GPU health checks, failing the task on any FAIL
  continuum.hydra.doctor:
    only: [gpu]
    exclude: [gpu.nvlink]
    fail_on: fail

- name: Diffable output for a golden-host comparison
  continuum.hydra.doctor:
    deterministic: true
  register: doctor

- name: Prolog-safe check before a job starts (seconds, no GPU load)
  continuum.hydra.doctor:
    level: quick
    fail_on: fail

- name: Burn-in with DCGM level 3 where dcgmi is installed
  continuum.hydra.doctor:
    level: deep
    expect:
      dcgm_diag_level: 3

- name: Show the catalogue without reading the host
  continuum.hydra.doctor:
    list_checks: true
"""

RETURN = r"""
schema_version:
  description: Version of the result schema.
  returned: unless O(list_checks)
  type: str
  sample: 1.2.0
level:
  description: The level the run was made at (O(level)).
  returned: unless O(list_checks)
  type: str
  sample: standard
environment:
  description:
    - Host facts (hostname, OS, kernel, boot id - C(/proc/sys/kernel/random/boot_id), new at each boot, which tells
      the fleet report's findings that a host rebooted - CPU, memory, Python, container / WSL / VM, NCCL settings,
      torch and NCCL versions when the torch probe ran).
    - Every GPU named by index, PCI bus id, UUID, model, driver and VBIOS, with the configuration fleet drift
      compares (persistence, ECC and MIG mode, PCIe maximum generation and width, memory).
  returned: unless O(list_checks)
  type: dict
  sample: {"hostname": "gpu-node-01", "os": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-18-amd64",
           "driver_version": "535.54.03", "gpus": [{"index": 0, "pci_bus_id": "00000000:01:00.0",
           "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298", "name": "NVIDIA A100-SXM4-80GB",
           "driver_version": "535.54.03", "vbios_version": "92.00.36.00.02",
           "persistence_mode": "Enabled", "ecc_mode": "Enabled", "mig_mode": "Disabled", "pcie_gen_max": 4,
           "pcie_width_max": 16, "memory_total_mib": 81920}]}
checks:
  description:
    - One record per check run, in catalogue order (by id with O(deterministic)).
    - Per-GPU findings are in C(details.gpus), each naming C(index), C(pci_bus_id) and C(uuid).
  returned: unless O(list_checks)
  type: list
  elements: dict
  sample: [{"id": "gpu.ecc_errors", "title": "ECC errors", "category": "gpu", "status": "FAIL",
            "message": "1 GPU with uncorrectable ECC errors", "details": {"gpus": []},
            "remediation": "Drain the node and reset the GPU; replace it if errors recur.", "duration_ms": 0.05}]
summary:
  description: Number of checks per status.
  returned: unless O(list_checks)
  type: dict
  sample: {"PASS": 30, "WARN": 2, "FAIL": 1, "SKIP": 8, "ERROR": 0}
overall_status:
  description: V(healthy), V(warning), V(error) (a check could not run) or V(failed).
  returned: unless O(list_checks)
  type: str
  sample: healthy
probes:
  description: Each probe that ran, with its status (V(ok), V(absent), V(error)), reason and duration.
  returned: unless O(list_checks)
  type: dict
  sample: {"nvidia_smi": {"status": "error", "reason": "nvidia-smi -q -x timed out after 30s", "duration_ms": 30002.1}}
total_duration_ms:
  description: Wall time of the run in milliseconds (absent with O(deterministic)).
  returned: unless O(list_checks) or O(deterministic)
  type: float
  sample: 812.4
catalogue:
  description: The checks with id, title, category, level (the lowest O(level) that runs it), the probes each reads and its rule.
  returned: when O(list_checks)
  type: list
  elements: dict
  sample: [{"id": "gpu.ecc_errors", "title": "ECC errors", "category": "gpu", "level": "quick", "reads": ["nvidia_smi"], "rule": "..."}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels as _levels
from ansible_collections.continuum.hydra.plugins.module_utils._host import import_cache
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL_ON, FAIL_ON_NEVER, fails_task


def main() -> None:
    import_cache.install()  # doctor's code below compiled once per host, not twice per run
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor

    module = AnsibleModule(
        argument_spec=dict(
            only=dict(type="list", elements="str", default=[]),
            exclude=dict(type="list", elements="str", default=[]),
            level=dict(type="str", choices=list(_levels.LEVELS), default=_levels.DEFAULT),
            list_checks=dict(type="bool", default=False),
            expect=dict(type="dict", default={}),
            timeouts=dict(type="dict", default={}, options=dict(
                nvidia_smi=dict(type="float"), kernel_log=dict(type="float"), torch=dict(type="float"),
                command=dict(type="float"), total=dict(type="float"), dcgm_diag=dict(type="float"), rvs=dict(type="float"),
                active=dict(type="float"),
            )),
            fail_on=dict(type="str", choices=list(FAIL_ON), default=FAIL_ON_NEVER),
            deterministic=dict(type="bool", default=False),
            nvidia_smi_path=dict(type="path"),
            torch_python=dict(type="path"),
            state_dir=dict(type="path", default="/var/lib/continuum-hydra"),
            slurm_node=dict(type="str"),
            force=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["list_checks"]:
        module.exit_json(changed=False, catalogue=_doctor.list_catalogue())
    try:
        result = _doctor.run(
            only=params["only"], exclude=params["exclude"], expect=params["expect"],
            timeouts={name: value for name, value in (params["timeouts"] or {}).items() if value is not None},
            deterministic=params["deterministic"], nvidia_smi_path=params["nvidia_smi_path"],
            torch_python=params["torch_python"], level=params["level"],
            state_dir=params["state_dir"], persist=not module.check_mode,
            slurm_node=params["slurm_node"], force=params["force"],
        )
    except _doctor.DoctorInputError as exc:
        module.fail_json(msg=str(exc))
    if fails_task(result["overall_status"], params["fail_on"]):
        module.fail_json(msg="doctor: host is %s (fail_on=%s)" % (result["overall_status"], params["fail_on"]), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
