#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: workload
short_description: Select and run workloads from a madengine-compatible (MAD) model catalogue, with phases and telemetry
version_added: 0.2.0
description:
  - Reads a catalogue in the MAD layout that ROCm madengine uses - a root C(models.json), and under C(scripts/) one
    C(models.json) or C(get_models_json.py) per directory - and selects models by O(tags) exactly as madengine does.
  - O(mode=discover) lists the selection with each model's resolved args, script, timeout and GPU count.
    O(mode=run) runs it, one model after the other, and returns one row per model, or per row of a model's
    C(multiple_results) CSV.
  - Every model is its own row whatever the others do - a failing, crashing or garbage-printing model is
    V(FAILURE), one killed at its deadline V(TIMEOUT), one asking for more GPUs than the host has V(SKIPPED);
    the next model still runs. Each run happens in a fresh directory under a temporary workspace that is removed
    afterwards.
  - "An idle guard runs before the first model: while a GPU compute process runs (C(nvidia-smi --query-compute-apps);
    on AMD the processes under C(/sys/class/kfd/kfd/proc)) or a SLURM job holds the node (C(squeue -w), the job the
    module runs in excluded), or when that cannot be read, no model runs - every one is V(SKIPPED) with the reason
    naming the job or process (see O(force), O(slurm_node)); RV(idle) has what was read."
  - While the models run, a sampler records CPU utilisation and host memory, and NVIDIA GPU utilisation, power,
    temperature, clocks and throttle reasons (NVML or one long-lived C(nvidia-smi)); each row carries the summary
    of its own run.
  - Training scripts can time their iteration phases with the C(hydra_phases) helper the module puts on the run's
    E(PYTHONPATH); each row then carries per-phase median, p95, share of the step time and the dominant phase.
  - Without O(catalogue), the collection's own catalogue (C(workloads/) in the collection) is used - tag V(smoke)
    for a training step, a host-to-device copy loop and an all-reduce that run anywhere in under a minute.
  - Runs on the target's Python 3.9+ with the standard library alone. C(.py) scripts run with the Python running
    the module, whose directory is also put first on E(PATH) for the scripts' own C(python3) calls.
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: partial
    details:
      - O(mode=discover) reads only and is the same in check mode.
      - O(mode=run) in check mode runs nothing and returns the selection as O(mode=discover) does.
  diff_mode:
    support: N/A
    details:
      - No setting of the host is changed (a run only writes its temporary workspace and O(run_log)), so there is
        no diff and C(changed) is always false.
options:
  mode:
    description:
      - V(discover) lists the selected models (with no O(tags), the names of all models in RV(available)).
      - V(run) runs the selected models.
    type: str
    choices: [discover, run]
    default: discover
  catalogue:
    description:
      - A MAD-layout directory on the host. Default - the collection's own catalogue.
      - Mutually exclusive with O(catalogue_files).
    type: path
  catalogue_files:
    description:
      - A catalogue given as file contents, relative path to text, written to a temporary directory for the task.
      - The action plugin fills it with the collection's C(workloads/) when neither this nor O(catalogue) is set.
    type: dict
  tags:
    description:
      - What to select, as madengine's C(--tags). Each item may be a comma-separated list; they are processed in
        order and the selections concatenated without de-duplication.
      - A model name (directory models are named C(dir/name)), one of the models' tags, or V(all);
        C(scope/name) (one slash, no colon) limits to the models of C(scripts/scope/), C(scope/all) selects all of them.
      - Parameters follow colons, C(name:batch_size=512:fast) appends C( --batch_size 512 --fast) to the args.
      - A tag that selects nothing fails the task, naming the tag.
    type: list
    elements: str
    default: []
  runtime:
    description:
      - V(host) runs the script directly.
      - V(docker) and V(podman) build the model's Dockerfile (the C(dockerfile) prefix, filtered by its C(# CONTEXT)
        line on the GPU vendor) and run the script in it with the GPUs passed through (AMD C(--device /dev/kfd
        --device /dev/dri); NVIDIA C(--gpus all), CDI C(nvidia.com/gpu=all) with podman).
      - V(auto) uses docker, else podman, when the model has a Dockerfile and the engine answers C(info) within 10
        seconds; otherwise the host.
    type: str
    choices: [host, docker, podman, auto]
    default: host
  timeout:
    description:
      - Seconds each model may run, madengine's rules - V(-1) uses the model's C(timeout) when above 0, else 7200;
        V(0) means no limit; any other value applies to every model.
    type: int
    default: -1
  gpu_vendor:
    description:
      - The GPU vendor the models see in E(MAD_GPU_VENDOR) and the containers get devices for. V(auto) takes it
        from the GPUs' PCI functions in sysfs (NVIDIA or AMD).
    type: str
    choices: [auto, amd, nvidia, none]
    default: auto
  gpus:
    description:
      - How many GPUs the host offers to the models; a model whose C(n_gpus) is larger is skipped (C(-1) means all).
      - Default - the NVIDIA and AMD GPU functions counted in sysfs (display controllers, and AMD's processing
        accelerators such as MI300X; 0 on a host without GPUs, where models asking for a GPU are skipped).
    type: int
  extra_env:
    description: Environment variables added to every model's run (after the C(MAD_*) ones, so they can override them).
    type: dict
    default: {}
  log_lines:
    description: How many of the last lines of each model's log a row keeps (control characters removed).
    type: int
    default: 50
  sample_interval:
    description: Seconds between two telemetry samples.
    type: float
    default: 1.0
  slurm_node:
    description:
      - The node's SLURM name, for the idle guard's C(squeue -w). Defaults to E(SLURMD_NODENAME), else the short host
        name. A node C(squeue) does not know cannot be confirmed idle, and no model runs.
    type: str
  force:
    description:
      - Run the models even on a node the idle guard finds busy (or cannot read); the C(forced) key of RV(idle) then says what
        occupied it and the task warns. It loads a user's job; use it on a node you own.
    type: bool
    default: false
  run_log:
    description:
      - A file the run appends JSON lines to as it goes (C(run_start), C(workload_start), C(workload_end),
        C(run_end)); C(tail -f) it while the task runs.
      - Created readable by its owner only (0600). A symbolic link at that path is never followed, and what is not a
        regular file (a FIFO) is refused; the task then fails with one line naming the path.
    type: path
seealso:
  - module: continuum.hydra.profile
notes:
  - C(docs/workloads.md) in the collection has a worked example and the differences from madengine.
  - The container runtimes build the command lines madengine builds; they are unit-tested, not exercised against a
    real engine in the collection's CI.
"""

EXAMPLES = r"""
- name: The built-in smoke workloads (no GPU needed)
  continuum.hydra.workload:
    mode: run
    tags: [smoke]
  register: smoke

- name: On a SLURM node whose SLURM name is not its host name; a busy node runs nothing (every model SKIPPED)
  continuum.hydra.workload:
    mode: run
    tags: [smoke]
    slurm_node: gpu-a01

- name: What a madengine catalogue would run for two tags, with a parameter
  continuum.hydra.workload:
    catalogue: /opt/MAD
    tags:
      - pyt_huggingface_bert:batch_size=32
      - dummy2/all

- name: Run them in containers when docker answers, five minutes each at most
  continuum.hydra.workload:
    mode: run
    catalogue: /opt/MAD
    tags: [pyt_huggingface_bert]
    runtime: auto
    timeout: 300
    extra_env:
      HF_HOME: /scratch/hf
    run_log: /var/tmp/hydra-workload.jsonl
"""

RETURN = r"""
mode:
  description: The mode that ran (V(discover) in check mode).
  returned: always
  type: str
  sample: run
tags:
  description: The tags as processed, comma lists flattened.
  returned: always
  type: list
  elements: str
  sample: [smoke]
catalogue:
  description:
    - The catalogue directory, or C((catalogue_files)) for a catalogue given as O(catalogue_files) (the
      collection's own when no catalogue was set).
  returned: always
  type: str
  sample: (catalogue_files)
available:
  description: The names of all models in the catalogue, in discovery order, when no O(tags) were given; else null.
  returned: always
  type: list
  elements: str
  sample: [train_step, h2d_copy, allreduce]
workloads:
  description:
    - In O(mode=discover) (and check mode), the selected models - C(name), C(args) (with tag parameters),
      C(scripts), C(dockerfile), C(n_gpus), C(timeout) (resolved seconds, null for none), C(tags),
      C(multiple_results).
    - In O(mode=run), one row per model or per C(multiple_results) CSV row (named C(<model>_<row model>), with the
      CSV's other columns in C(extra)) - C(name), C(args), C(status) (V(SUCCESS), V(FAILURE), V(SKIPPED),
      V(TIMEOUT)), C(performance) (the number as printed, a string), C(metric), C(duration_s), C(exit_code)
      (null when killed or not run), C(log_tail) (list of lines), C(phases), C(telemetry), C(runtime),
      C(timeout_s), C(reason) (why it is not V(SUCCESS)) and C(extra) (the other CSV columns, else empty).
    - C(phases) is null unless the script wrote phase records - C(steps), C(step_median_s), C(step_p95_s),
      C(phases) (per name C(count), C(median_s), C(p95_s), C(total_s), C(share) of the step time), C(dominant),
      C(unaccounted_share).
    - C(telemetry) is the sampler's summary over the model's run - C(cpu) (C(samples), C(util_mean_pct),
      C(util_max_pct)), C(gpus) (per GPU utilisation, memory, power, temperature, clocks, C(throttle_reasons), PCIe)
      and C(memory) (C(used_max_gib), C(used_mean_gib), C(total_gib)).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "train_step", "args": "--seconds 8", "status": "SUCCESS", "performance": "1524.8",
            "metric": "samples_per_second", "duration_s": 9.1, "exit_code": 0, "runtime": "host", "timeout_s": 60,
            "reason": null, "log_tail": ["backend: numpy 2.4.6 on cpu", "performance: 1524.8 samples_per_second"],
            "phases": {"steps": 300, "step_median_s": 0.021, "step_p95_s": 0.03, "dominant": "backward",
                       "unaccounted_share": 0.01,
                       "phases": {"forward": {"count": 300, "median_s": 0.006, "p95_s": 0.009, "total_s": 1.9, "share": 0.29}}},
            "telemetry": {"cpu": {"samples": 9, "util_mean_pct": 52.0, "util_max_pct": 60.1}, "gpus": [],
                          "memory": {"samples": 9, "used_max_gib": 3.1, "used_mean_gib": 3.0, "total_gib": 15.6}}}]
summary:
  description: How many rows have each status.
  returned: in run mode, outside check mode
  type: dict
  sample: {"SUCCESS": 3, "FAILURE": 0, "SKIPPED": 0, "TIMEOUT": 0}
sampler:
  description: The telemetry sampler - C(gpu_source) (V(nvml), V(nvidia-smi) or null), C(interval_s), sample counts, C(notes).
  returned: in run mode, outside check mode
  type: dict
  sample: {"gpu_source": null, "interval_s": 1.0, "cpu_samples": 30, "gpu_samples": 0,
           "notes": ["no nvidia-smi: no GPU telemetry"]}
gpus:
  description: The GPU count the run used (O(gpus), else counted).
  returned: in run mode, outside check mode
  type: int
  sample: 0
gpu_vendor:
  description: V(AMD), V(NVIDIA) or null.
  returned: in run mode, outside check mode
  type: str
  sample: null
idle:
  description:
    - The idle guard read before the first model - C(node) (the SLURM name asked), C(gpu_processes) (C(pid), C(gpu),
      C(used_memory_mib), C(source)), C(slurm) (C(node), C(jobs) with C(id), C(name), C(user), C(state), C(own_job);
      null on a host that is not a SLURM node), C(unconfirmed) (what could not be read), C(occupants) (one phrase each),
      C(force), C(refused) (why no model ran, null when they ran) and C(forced) (what O(force) overrode, or null).
    - Null when nothing was selected.
  returned: in run mode, outside check mode
  type: dict
  sample: {"node": "gpu-a01", "gpu_processes": [], "unconfirmed": [], "force": false, "forced": null,
           "slurm": {"node": "gpu-a01", "own_job": null,
                     "jobs": [{"id": "4182", "name": "train", "user": "alice", "state": "RUNNING"}]},
           "occupants": ["SLURM job 4182 (train, user alice, running)"],
           "refused": "node busy (SLURM job 4182 (train, user alice, running)); force: true loads it anyway"}
run_log:
  description: The O(run_log) path, or null.
  returned: in run mode, outside check mode
  type: str
  sample: /var/tmp/hydra-workload.jsonl
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._workload.catalogue import CatalogueError
from ansible_collections.continuum.hydra.plugins.module_utils._workload.run import WorkloadError, execute


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["discover", "run"], default="discover"),
            catalogue=dict(type="path"),
            catalogue_files=dict(type="dict"),
            tags=dict(type="list", elements="str", default=[]),
            runtime=dict(type="str", choices=["host", "docker", "podman", "auto"], default="host"),
            timeout=dict(type="int", default=-1),
            gpu_vendor=dict(type="str", choices=["auto", "amd", "nvidia", "none"], default="auto"),
            gpus=dict(type="int"),
            extra_env=dict(type="dict", default={}),
            log_lines=dict(type="int", default=50),
            sample_interval=dict(type="float", default=1.0),
            run_log=dict(type="path"),
            slurm_node=dict(type="str"),
            force=dict(type="bool", default=False),
        ),
        mutually_exclusive=[["catalogue", "catalogue_files"]],
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = execute(
            mode=params["mode"], tags=params["tags"], catalogue=params["catalogue"], catalogue_files=params["catalogue_files"],
            runtime=params["runtime"], timeout=params["timeout"], gpu_vendor=params["gpu_vendor"], gpus=params["gpus"],
            extra_env=params["extra_env"], log_lines=params["log_lines"], sample_interval_s=params["sample_interval"],
            run_log=params["run_log"], check_mode=module.check_mode, slurm_node=params["slurm_node"], force=params["force"],
        )
    except (CatalogueError, WorkloadError) as exc:
        module.fail_json(msg=str(exc))
    if (result.get("idle") or {}).get("forced"):
        module.warn("force: the models ran although %s" % result["idle"]["forced"])
    if module.check_mode:
        result["mode"] = "discover"
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
