"""Synthetic fleets for fleet-analysis tests and benchmarks.

Hosts are built from real recordings: each class's GPU is a GPU of a recorded `nvidia-smi -q -x`
(tests/fixtures/nvidia-smi) parsed by the collection's own parser, replicated to the class's GPU count
with a UUID and a serial of its own on every host (never the recording's, which would make every host's
GPU the same GPU to history and findings); the environment is what doctor's `_doctor.environment()` makes of it (per-GPU modes,
PCIe link and memory included). Checks are judged by the registry's own evaluate() from
`_results.finding()`; the profile summary is what the fleet report's `profile_summary()` makes of a
profile result built from profile's own records (`static_gpu`, `gpu_entry`, `outcome`), with each
class's reference figures added the way any profile figure is read (_fleet/figures.py). Anomalies are
planted by editing a copy of a host's result, never by writing a result from scratch.
"""

import copy
import math
import os
import random

from ansible_collections.continuum.hydra.plugins.module_utils import _results
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.gpu import gpu_entry
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import outcome
from ansible_collections.continuum.hydra.plugins.module_utils._profile.run import PROFILE_SCHEMA_VERSION
from ansible_collections.continuum.hydra.plugins.module_utils._profile.static import static_gpu
from ansible_collections.continuum.hydra.plugins.module_utils._status import BENCH_OK, FAIL, PASS, READ_ABSENT, READ_OK, SKIP, WARN, host_verdict
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import host_figures, lower_is_better
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.profile_summary import profile_summary as _summarise
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

GIB = 1024 ** 3
_PARSED = {}


def judge(check_id, **given):
    """One catalogue check run by the registry on the given probe envelopes; every other probe it reads is absent
    (not on this host), as collect() would report it."""
    (chk,) = [c for c in CATALOGUE if c.id == check_id]
    absent = {"status": READ_ABSENT, "data": None, "reason": "not on this host", "duration_ms": 0.0}
    return registry.evaluate(chk, dict((name, given.get(name, absent)) for name in chk.probes), {})


def recorded_smi(name):
    """The parsed data of a recorded nvidia-smi XML (cached)."""
    if name not in _PARSED:
        with open(os.path.join(REPO, "tests", "fixtures", "nvidia-smi", name)) as handle:
            _PARSED[name] = parse_nvidia_smi(handle.read())
    return _PARSED[name]


# name -> (fixture, GPUs per host, CPU model, MemTotal bytes, reference figures per GPU / per host)
CLASSES = {
    "a100x8": ("a100-sxm4-v12.xml", 8, "AMD EPYC 7763 64-Core Processor", 1007 * GIB,
               {"bf16_tflops": 280.0, "hbm_gbps": 1700.0, "h2d_gbps": 24.0},
               {"triad_gbps": 180.0, "read_iops": 600000.0, "cpu_gflops_all_cores": 2100.0, "allreduce_latency_us": 40.0}),
    "a10gx4": ("a10g.xml", 4, "AMD EPYC 7R32", 187 * GIB,
               {"bf16_tflops": 62.0, "hbm_gbps": 560.0, "h2d_gbps": 12.0},
               {"triad_gbps": 90.0, "read_iops": 250000.0, "cpu_gflops_all_cores": 700.0, "allreduce_latency_us": 85.0}),
    "t4x1": ("tesla-t4.xml", 1, "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 62 * GIB,
             {"bf16_tflops": 24.0, "hbm_gbps": 280.0, "h2d_gbps": 6.0},
             {"triad_gbps": 40.0, "read_iops": 90000.0, "cpu_gflops_all_cores": 200.0}),
    "ada4000x2": ("rtx-4000-sff-ada-v13.xml", 2, "Intel(R) Xeon(R) w5-2455X", 251 * GIB,
                  {"bf16_tflops": 48.0, "hbm_gbps": 330.0, "h2d_gbps": 12.5},
                  {"triad_gbps": 110.0, "read_iops": 400000.0, "cpu_gflops_all_cores": 900.0, "allreduce_latency_us": 60.0}),
}


def _gpu_record(smi_gpu, index, rng):
    gpu = copy.deepcopy(smi_gpu)
    gpu["index"] = index
    gpu["uuid"] = "GPU-%08x-%04x-%04x-%04x-%012x" % tuple(rng.getrandbits(bits) for bits in (32, 16, 16, 16, 48))
    gpu["serial"] = "%013d" % rng.randrange(10 ** 12, 10 ** 13)
    gpu["pci_bus_id"] = "00000000:%02X:00.0" % (0x10 + index * 0x10)
    return gpu


def environment(host, smi, gpus, cpu_model, memory_bytes, kernel="6.1.0-18-amd64"):
    """doctor's environment for this host, from the real assembly function."""
    host_data = {"hostname": host, "os": "Debian GNU/Linux 12 (bookworm)", "kernel": kernel, "cpu_model": cpu_model,
                 "logical_cpus": 128, "memory_total_bytes": memory_bytes, "nccl_settings": {}}
    return _doctor.environment({"host": {"data": host_data}, "nvidia_smi": {"data": dict(smi, gpus=gpus)}})


def check(check_id, status=PASS, gpus=None, details=None, remediation=None, title=None):
    """A check record as the registry's evaluate() makes it, of a check that finds ``status``."""
    found = _results.finding(status, "%s: %s" % (check_id, status), dict(details or {}, **({"gpus": gpus} if gpus else {})),
                             remediation)
    record = registry.evaluate(registry.Check(check_id, title or check_id, lambda probes, expect: found, (), ()), {}, {})
    record["duration_ms"] = 0.1  # deterministic reports
    return record


def random_checks(rng, env):
    """The whole catalogue with ~1 % FAIL, 4 % WARN, 10 % SKIP; failures name a GPU."""
    refs = [_results.gpu_ref(g) for g in env["gpus"]]
    checks = []
    for chk in CATALOGUE:
        roll = rng.random()
        status = FAIL if roll < 0.01 else WARN if roll < 0.05 else SKIP if roll < 0.15 else PASS
        checks.append(check(chk.id, status, gpus=refs[:1] if status in (FAIL, WARN) else None, title=chk.title,
                            remediation="fix %s" % chk.id if status != PASS else None))
    return checks


def doctor_result(env, checks=None, torch_version="2.5.1+cu124", nccl_version="2.21.5"):
    checks = checks if checks is not None else [
        check("gpu.ecc_errors"), check("gpu.persistence_mode"), check("system.dev_shm"),
        check("pytorch.installed", details={"python": "/opt/venv/bin/python", "version": torch_version}),
        check("nccl.torch_backend", details={"nccl_available": True, "nccl_version": nccl_version}),
    ]
    summary = _results.summarize(checks)
    return {"schema_version": _results.SCHEMA_VERSION, "environment": env, "checks": checks, "summary": summary,
            "overall_status": host_verdict(summary),
            "probes": {"nvidia_smi": {"status": READ_OK, "reason": None, "duration_ms": 1.0}}}


DEFAULT_VERDICT = {"primary_bottleneck": "gpu_compute", "secondary_bottleneck": "memory_bandwidth", "confidence": 0.8}


def profile_result(smi_gpus, verdict=None):
    """A profile module result of a host whose GPU benchmark ran on every GPU, from profile's own record builders."""
    return {"schema_version": PROFILE_SCHEMA_VERSION,
            "static_profile": {"gpus": [static_gpu(g) for g in smi_gpus]},
            "benchmarks": {"gpu_sustained": outcome(BENCH_OK, "%d of %d GPUs measured" % (len(smi_gpus), len(smi_gpus)), method="torch",
                                                    gpus=[gpu_entry({"index": g["index"], "name": g["name"]}) for g in smi_gpus])},
            "analysis": dict(verdict or DEFAULT_VERDICT), "remediation": {}}


def profile_summary(smi_gpus, gpu_figures, host_figures, verdict=None):
    """The fleet report's summary of profile_result(), with the given figures per GPU and for the host."""
    summary = _summarise(profile_result(smi_gpus, verdict))
    summary["figures"].update(host_figures)
    for gpu in summary["gpus"]:
        gpu["figures"] = dict(gpu_figures)
    return summary


def student_t(rng, dof):
    """A Student-t draw with ``dof`` (> 2) degrees of freedom, scaled to a standard deviation of 1: a normal draw
    over the root of a chi-square draw divided by its degrees of freedom, times sqrt((dof - 2) / dof)."""
    chi_square = rng.gammavariate(dof / 2.0, 2.0)
    return rng.gauss(0.0, 1.0) / math.sqrt(chi_square / dof) * math.sqrt((dof - 2.0) / dof)


# A heavy-tailed draw can fall below -1 / cv (about once in 10^5 at 3 degrees of freedom and CV 5 %): a figure
# is never zero or negative, a benchmark that ran measured something.
LOWEST_FACTOR = 0.01


def noisy(figures, rng, cv, dof=None, bias=1.0):
    """Each figure x bias x (1 + cv x a draw of standard deviation 1): Gaussian, or Student-t of ``dof`` degrees of
    freedom (heavy tails with the same coefficient of variation)."""
    if dof is None:
        return dict((k, v * bias * (1.0 + rng.gauss(0.0, cv))) for k, v in figures.items())
    return dict((k, v * bias * max(LOWEST_FACTOR, 1.0 + cv * student_t(rng, dof))) for k, v in figures.items())


class SyntheticFleet:
    """Hosts named <class>-<nnnnn>, each with a doctor result and a profile summary, all healthy and on the
    class's reference figures with run-to-run noise of coefficient of variation ``cv``: Gaussian, or Student-t of
    ``dof`` degrees of freedom. ``bias_cv``: each host and each GPU also keeps a lasting factor of its own, drawn
    once (Gaussian around 1, that coefficient of variation) and applied to all its figures in every run, as
    silicon and firmware make some parts a little faster or slower for good."""

    def __init__(self, sizes, seed=1, cv=0.02, dof=None, bias_cv=0.0):
        self.rng = random.Random(seed)
        self.cv = cv
        self.dof = dof
        self.bias = {}  # host -> (host factor, [factor of each GPU]) when bias_cv
        self.hosts = {}  # name -> {"class", "doctor", "profile"}
        bias_rng = random.Random(seed * 7907 + 1)  # its own stream: the Gaussian fleets draw exactly as before
        for class_name in sorted(sizes):
            fixture, count, cpu, memory, gpu_ref, host_ref = CLASSES[class_name]
            smi = recorded_smi(fixture)
            for i in range(sizes[class_name]):
                name = "%s-%05d" % (class_name, i)
                if bias_cv:
                    self.bias[name] = (bias_rng.gauss(1.0, bias_cv), [bias_rng.gauss(1.0, bias_cv) for _unused in range(count)])
                host_bias, gpu_bias = self._bias(name, count)
                gpus = [_gpu_record(smi["gpus"][0], index, self.rng) for index in range(count)]
                env = environment(name, smi, gpus, cpu, memory)
                profile = profile_summary(gpus, {}, noisy(host_ref, self.rng, cv, dof, host_bias))
                for gpu, bias in zip(profile["gpus"], gpu_bias):
                    gpu["figures"] = noisy(gpu_ref, self.rng, cv, dof, bias)
                self.hosts[name] = {"class": class_name, "doctor": doctor_result(env), "profile": profile}

    def _bias(self, name, count):
        return self.bias.get(name) or (1.0, [1.0] * count)

    def next_run(self, seed):
        """The fleet measured again: every figure redrawn around its class reference (times its lasting bias) with
        fresh noise (same hosts, GPUs and UUIDs); plant slowdowns again after it."""
        rng = random.Random(seed)
        for name in sorted(self.hosts):
            record = self.hosts[name]
            gpu_ref, host_ref = CLASSES[record["class"]][4:6]
            host_bias, gpu_bias = self._bias(name, len(record["profile"]["gpus"]))
            record["profile"]["figures"].update(noisy(host_ref, rng, self.cv, self.dof, host_bias))
            for gpu, bias in zip(record["profile"]["gpus"], gpu_bias):
                gpu["figures"] = noisy(gpu_ref, rng, self.cv, self.dof, bias)

    def names(self, class_name):
        return sorted(h for h, v in self.hosts.items() if v["class"] == class_name)

    def slow_host(self, host, factor, metric=None):
        """Scale a host's figures (one metric, or every host figure) by factor (0.8 = 20 % slower)."""
        profile = self.hosts[host]["profile"]
        figures = profile["figures"]
        for key in [metric] if metric else list(host_figures(profile)):
            figures[key] = figures[key] / factor if lower_is_better(key) else figures[key] * factor

    def slow_gpu(self, host, index, factor, metric="bf16_tflops"):
        gpu = self.hosts[host]["profile"]["gpus"][index]
        gpu["figures"][metric] *= factor
        return gpu["uuid"]

    def set_env(self, host, key, value, gpu_index=None):
        env = self.hosts[host]["doctor"]["environment"]
        if gpu_index is None:
            env[key] = value
        else:
            env["gpus"][gpu_index][key] = value

    def collector(self, profile=True, doctor=True):
        collector = FleetCollector()
        for name in sorted(self.hosts):
            if doctor:
                collector.add_doctor(name, self.hosts[name]["doctor"])
            if profile:
                collector.add_profile(name, self.hosts[name]["profile"])
        return collector

    def report(self, generated_at="2026-11-22T13:00:00+00:00", **kwargs):
        return self.collector(**kwargs).build(generated_at, "doctor.yml")
