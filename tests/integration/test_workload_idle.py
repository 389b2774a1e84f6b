"""The idle guard of playbooks/workloads.yml: a busy host runs no model, every one SKIPPED naming what holds it.

Four local-connection hosts, one real playbook run, the real callback. Busy is real where it can be here: a job of a
real slurmctld/slurmd (`sbatch -w node1 --wrap 'sleep ...'`, tests/utils/slurm_cluster.sh) holds one host's node; a GPU
process cannot exist without a GPU, so another host's fake nvidia-smi answers `--query-compute-apps` with a training
process (tests/support/fleet.py BUSY_COMPUTE_APPS). Each model script leaves a marker file: whether a model loaded a
host is whether its marker exists.
"""

import json
import os
import sys

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import BUSY_COMPUTE_APPS, BUSY_PROCESS, fixture, run_playbook, write_host_bin
from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.slurm_cluster import occupy, release, running_cluster

pytestmark = pytest.mark.integration

PLAYBOOK = os.path.join(REPO, "playbooks", "workloads.yml")
MODELS = ("train", "check")
SCRIPT = '#!/bin/bash\ntouch "$MARKERS/$MAD_MODEL_NAME"\necho "performance: 12.5 samples_per_second"\n'


def catalogue(root):
    for name in MODELS:
        os.makedirs(os.path.join(root, "scripts", name))
        path = os.path.join(root, "scripts", name, "run.sh")
        with open(path, "w") as handle:
            handle.write(SCRIPT)
        os.chmod(path, 0o755)
    with open(os.path.join(root, "models.json"), "w") as handle:
        json.dump([{"name": name, "scripts": "scripts/%s/run.sh" % name, "n_gpus": "-1", "tags": ["idle"], "args": "",
                    "timeout": 60} for name in MODELS], handle)


def host(root, name, conf=None, busy_gpu=False, **extra):
    """A local host whose models leave markers in <root>/<name>/markers; a fake nvidia-smi listing a compute process
    when ``busy_gpu``; the cluster's SLURM_CONF when ``conf``."""
    markers = os.path.join(root, name, "markers")
    os.makedirs(markers)
    bindir = write_host_bin(root, name, fixture("tesla-t4.xml"), compute_apps=BUSY_COMPUTE_APPS) if busy_gpu \
        else write_host_bin(root, name)
    environment = {"PATH": "%s:/usr/bin:/bin" % bindir}
    if conf:
        environment["SLURM_CONF"] = conf
    values = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "hydra_environment": environment,
              "hydra_workload_extra_env": {"MARKERS": markers}}
    values.update(extra)
    return values


def ran(root, name):
    return sorted(os.listdir(os.path.join(root, name, "markers")))


def test_a_busy_host_skips_every_model_naming_the_job_or_process_and_force_runs_them(tmp_path):
    root = str(tmp_path)
    catalogue(os.path.join(root, "catalogue"))
    with running_cluster(os.path.join(root, "slurm"), 2) as conf:
        job = occupy(conf, "node1")
        try:
            hosts = {"job-busy": host(root, "job-busy", conf, hydra_slurm_node="node1"),
                     "idle": host(root, "idle", conf, hydra_slurm_node="node2"),
                     "gpu-busy": host(root, "gpu-busy", busy_gpu=True),
                     "forced": host(root, "forced", busy_gpu=True, hydra_force=True)}
            reports = os.path.join(root, "reports")
            os.makedirs(reports)
            proc, report = run_playbook({"all": {"hosts": hosts}}, reports, playbook=PLAYBOOK, timeout=300, extra_vars={
                "hydra_workload_catalogue": os.path.join(root, "catalogue"), "hydra_workload_tags": ["idle"],
                "hydra_workload_gpus": 0, "hydra_workload_gpu_vendor": "none", "hydra_workload_sample_interval": 0.2})
        finally:
            release(conf, job)
    assert proc.returncode == 0 and report is not None, proc.stdout[-4000:] + proc.stderr[-4000:]
    works = report["workloads"]["workloads"]
    skipped = dict((model, dict((s["host"], s["reason"]) for s in works[model]["skipped"])) for model in MODELS)
    # The node a SLURM job holds, and the host a GPU process holds: no model ran, each SKIPPED naming what holds it.
    for model in MODELS:
        assert skipped[model]["job-busy"].startswith("not run: node busy (SLURM job %s (user-train, user root, running))"
                                                     % job), skipped[model]
        assert skipped[model]["gpu-busy"] == "not run: node busy (%s); force: true loads it anyway" % BUSY_PROCESS
        assert set(skipped[model]) == {"job-busy", "gpu-busy"}
    assert ran(root, "job-busy") == [] and ran(root, "gpu-busy") == []
    # The idle node of the same cluster ran them; force ran them on the busy host, and the run says so.
    assert ran(root, "idle") == sorted(MODELS) and ran(root, "forced") == sorted(MODELS)
    assert "force: the models ran although node busy (%s)" % BUSY_PROCESS in proc.stdout + proc.stderr
    assert report["workloads"]["counts"]["SKIPPED"] == 4 and report["workloads"]["counts"]["SUCCESS"] == 4
