#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: profile
short_description: Static profile, sustained benchmarks under telemetry and a bottleneck verdict of a GPU/ML host
version_added: 0.1.0
description:
  - Reads the host (CPU, memory, storage, OS, Python runtime, GPUs through the same C(nvidia-smi -q -x) probe as
    M(continuum.hydra.doctor), the GPU/NIC/CPU topology from C(nvidia-smi topo -m), NICs and InfiniBand ports).
  - Runs the selected sustained benchmarks (O(benchmarks)) with a warmup and a duration each, while a sampler
    records GPU telemetry (NVML in-process when C(pynvml) imports, else one long-lived C(nvidia-smi -lms) process)
    and CPU utilisation from C(/proc/stat). Each benchmark carries a summary of what it did to the machine.
  - Judges the measurements against O(expect) and the shipped SKU reference table and returns the primary and
    secondary bottleneck, a confidence, the reasons and prioritised remediation actions.
  - Never changes the host. The disk benchmark's test file is the one thing written (besides O(run_log) when set),
    and it is removed on success, error, timeout and SIGTERM.
  - A module cannot print to the terminal while it runs; progress of long runs goes to O(run_log) (C(tail -f) it).
  - Runs on the target's Python 3.9+ with the standard library alone; NumPy and PyTorch are used when present,
    with labelled fallbacks or a skip otherwise.
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Changes no setting of the host, in check mode or not, and always returns C(changed=false).
      - The benchmarks run in check mode too, so they load the host for their duration, and the disk benchmark
        writes a temporary file in its directory, which is always removed (also on error and timeout).
  diff_mode:
    support: N/A
    details:
      - Nothing is changed, so there is no diff.
options:
  benchmarks:
    description:
      - The sustained benchmarks to run; V([]) gives the static profile only.
      - V(cpu) float64 matmul GFLOP/s on one thread and on every usable CPU (NumPy, else a pure-Python loop).
      - V(memory) STREAM copy and triad GB/s on every usable CPU (STREAM's loops compiled with the host's C compiler,
        else NumPy kernels, else a stdlib copy).
      - V(disk) 4 KiB random-read IOPS and latency percentiles with O_DIRECT, sequential read and write MB/s.
      - V(gpu) per GPU, in a PyTorch subprocess with a timeout, matmul TFLOP/s at bf16, fp16 and fp32, pinned
        host-to-device and device-to-host GB/s, device memory GB/s.
    type: list
    elements: str
    choices: [cpu, memory, disk, gpu]
    default: [cpu, memory, disk, gpu]
  warmup_s:
    description: Seconds each benchmark runs before it measures.
    type: float
    default: 2.0
  duration_s:
    description: Seconds each benchmark measures for (sustained figures).
    type: float
    default: 10.0
  benchmark_options:
    description:
      - Per-benchmark overrides, keyed by benchmark. Every benchmark accepts C(warmup_s) and C(duration_s).
      - "V(cpu): C(matrix_n) (default 2048), C(timeout_s)."
      - "V(memory): C(array_mib) (default 4x the last-level cache, at least 64), C(threads) (default: every count
        from 1 to the usable CPUs, the best kept), C(method) (V(auto) (default): V(c_stream) where a C compiler
        builds it, else V(numpy_blocked), else the stdlib copy; or one of those two alone, failing when it cannot run)."
      - "V(disk): C(directory) (default the system temp directory; point it at the storage your data loads from),
        C(file_size_mib) (default 256), C(timeout_s)."
      - "V(gpu): C(matrix_n) (default 8192), C(transfer_mib) (default 256), C(device_copy_mib) (default 1024),
        C(repeats) (default 10), C(timeout_s) per GPU (default 3 x (warmup + duration) + 120)."
    type: dict
    default: {}
  sample_interval_s:
    description: Seconds between telemetry samples.
    type: float
    default: 1.0
  expect:
    description:
      - What this host should reach, usually C({{ hydra_expect }}); the same dict doctor reads.
      - "profile reads C(gpu_bf16_tflops_min), C(gpu_h2d_gbps_min), C(gpu_memory_bandwidth_gbps_min), C(gpu_sku),
        C(memory_triad_gbps_min) (default 10), C(cpu_gflops_min), C(disk_read_iops_min) (default 1000),
        C(disk_read_p99_us_max) (default 10000) and C(disk_seq_read_mbps_min) (default 200)."
      - Without them the GPUs are judged against the SKU table (C(docs/profile.md)).
    type: dict
    default: {}
  timeouts:
    description:
      - Timeouts in seconds for C(nvidia_smi) (the probe and C(topo -m)), C(torch) (the inventory) and C(command)
        (each stat of a mount, InfiniBand and other reads that could hang).
    type: dict
    default: {}
  nvidia_smi_path:
    description: Path of the C(nvidia-smi) binary. By default it is looked up on E(PATH).
    type: path
  torch_python:
    description: Python interpreter whose PyTorch runs the GPU benchmark (for example a training virtualenv).
    type: path
  run_log:
    description:
      - JSONL file the run appends its phases, progress and verdict to, one line each, flushed as written.
      - Its parent directory must exist. Not written when unset.
      - Created readable by its owner only (0600). A symbolic link at that path is never followed, and what is not a
        regular file (a FIFO) is refused; the task then fails with one line naming the path.
    type: path
seealso:
  - module: continuum.hydra.doctor
  - plugin: continuum.hydra.fleet_report
    plugin_type: callback
notes:
  - The SKU reference table, each rule of the verdict and the meaning of every result field are in C(docs/profile.md).
"""

EXAMPLES = r"""
- name: Profile a GPU host against its group's expectations, progress in a run log
  continuum.hydra.profile:
    expect: "{{ hydra_expect | default({}) }}"
    run_log: /var/tmp/hydra-profile.jsonl
    benchmark_options:
      disk:
        directory: /data
        file_size_mib: 1024

- name: Static profile only
  continuum.hydra.profile:
    benchmarks: []

- name: A quick GPU-only run with a training virtualenv's torch
  continuum.hydra.profile:
    benchmarks: [gpu]
    warmup_s: 1
    duration_s: 5
    torch_python: /opt/venvs/train/bin/python
  register: profile
"""

RETURN = r"""
schema_version:
  description: Version of the profile result schema.
  returned: always
  type: str
  sample: 1.0.0
static_profile:
  description:
    - C(cpu) (model, sockets, cores, threads, NUMA nodes, governors, ISA flags, last-level cache), C(memory) (total,
      available, hugepages, per NUMA node), C(storage) (root device and every mount with fs type, rotational, free),
      C(os) (distro, kernel, container and VM hints), C(runtime) (Python, NumPy, torch), C(gpus) (model, memory,
      PCIe link, power limits, matched SKU), C(gpu_topology) (from C(nvidia-smi topo -m)), C(network) (NICs with speed
      and MTU, InfiniBand ports with rate) and C(notes) for what could not be read.
  returned: always
  type: dict
  sample: {"cpu": {"model": "AMD EPYC 9654", "sockets": 2, "cores_physical": 192, "numa_nodes": 2, "isa": ["avx512f"]},
           "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "sku": "h100_sxm",
                     "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}}],
           "notes": ["torch is not installed for /usr/bin/python3"]}
benchmark_results:
  description: The headline figures as a flat list, each with C(name) (unit in the name), C(status)
    (V(PASS) measured, V(WARN) measured by a fallback, V(SKIP), V(ERROR)), C(result), C(unit) and C(message).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "memory_bandwidth.triad_gbps", "status": "PASS", "result": 212.4, "unit": "GB/s",
            "message": "STREAM copy/triad, NumPy blocked out= kernels on 96 threads"}]
benchmarks:
  description:
    - C(cpu_sustained), C(memory_bandwidth), C(gpu_sustained) (C(gpus), one entry per GPU) and C(disk_random_io), each
      with C(status) (V(ok), V(fallback), V(skipped), V(error)), C(message), its figures with units in their names
      (C(single_thread_gflops), C(triad_gbps), C(bf16_tflops), C(h2d_gbps), C(read_iops), C(read_latency_us)...) and
      C(telemetry), the resource summary of its run (CPU and per GPU mean/max utilisation, peak memory, mean/max
      power, min/mean SM clock, throttle reasons, PCIe link under load).
  returned: always
  type: dict
  sample: {"disk_random_io": {"status": "ok", "o_direct": true, "read_iops": 21873.5,
                              "read_latency_us": {"p50": 43.1, "p95": 51.0, "p99": 88.7, "max": 1850.2, "mean": 45.7},
                              "seq_read_mbps": 1830.2, "seq_write_mbps": 1410.8, "test_file_removed": true}}
telemetry:
  description: The sampler used (C(gpu_source) V(nvml), V(nvidia-smi) or null), its interval, sample counts and notes;
    null when no benchmark ran.
  returned: always
  type: dict
  sample: {"gpu_source": "nvml", "interval_s": 1.0, "cpu_samples": 62, "gpu_samples": 496, "notes": []}
analysis:
  description:
    - C(primary_bottleneck) and C(secondary_bottleneck) (V(gpu_thermal), V(gpu_power), V(gpu_clocks), V(gpu_host_link),
      V(gpu_compute), V(gpu_memory_bandwidth), V(memory_bandwidth), V(cpu_compute), V(disk_io) or null),
      C(confidence) (0 to 1), C(reasons) (strongest first), C(findings) (each reason with its bottleneck, score and
      evidence), C(scores) per bottleneck, C(recommendations) and C(notes) (what was not judged and why).
  returned: always
  type: dict
  sample: {"primary_bottleneck": "gpu_thermal", "secondary_bottleneck": "disk_io", "confidence": 0.9,
           "reasons": ["GPU 3 (NVIDIA H100 80GB HBM3): hw_thermal_slowdown under load, up to 91 C"],
           "recommendations": ["Fix GPU cooling"]}
remediation:
  description: C(priority) (V(high), V(medium), V(low)) and C(actions), the primary bottleneck's first, each with
    C(title), C(impact), C(difficulty), C(reason) and C(bottleneck).
  returned: always
  type: dict
  sample: {"priority": "high", "actions": [{"title": "Fix GPU cooling", "impact": "high", "difficulty": "medium",
           "reason": "Thermal slowdown under load...", "bottleneck": "gpu_thermal"}]}
run_log:
  description: Path of the JSONL run log, or null.
  returned: always
  type: str
  sample: /var/tmp/hydra-profile.jsonl
phases:
  description: Each phase (static profile, then each benchmark) with its status and the run time when it ended.
  returned: always
  type: list
  elements: dict
  sample: [{"phase": "memory", "status": "ok", "elapsed_s": 14.2}]
total_duration_ms:
  description: Wall time of the run in milliseconds.
  returned: always
  type: float
  sample: 61234.5
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._profile import run as _profile
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.disk import Terminated


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            benchmarks=dict(type="list", elements="str", choices=list(_profile.BENCHMARKS), default=list(_profile.BENCHMARKS)),
            warmup_s=dict(type="float", default=2.0),
            duration_s=dict(type="float", default=10.0),
            benchmark_options=dict(type="dict", default={}),
            sample_interval_s=dict(type="float", default=1.0),
            expect=dict(type="dict", default={}),
            timeouts=dict(type="dict", default={}),
            nvidia_smi_path=dict(type="path"),
            torch_python=dict(type="path"),
            run_log=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = _profile.run(
            benchmarks=params["benchmarks"], benchmark_options=params["benchmark_options"], warmup_s=params["warmup_s"],
            duration_s=params["duration_s"], sample_interval_s=params["sample_interval_s"], expect=params["expect"],
            timeouts=params["timeouts"], nvidia_smi_path=params["nvidia_smi_path"], torch_python=params["torch_python"],
            run_log=params["run_log"],
        )
    except _profile.ProfileInputError as exc:
        module.fail_json(msg=str(exc))
    except Terminated as exc:
        module.fail_json(msg="profile: %s during the disk benchmark; its test file was removed" % exc)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
