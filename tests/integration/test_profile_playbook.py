"""A real `ansible-playbook playbooks/profile.yml` run on local hosts with tiny durations.

Two hosts: "gpu-node" runs the module with the test virtualenv's Python (NumPy present, no torch) and a fake
`nvidia-smi` first on PATH that replays recorded real output (`-q -x` of an A100, `topo -m` of a two-socket A100
node, and `--query-gpu ... -lms` samples of an H100); "bare-node" runs it with a fresh virtualenv's Python that
has no NumPy, as a bare target would. Everything else is real: the module, its benchmarks and sampler, the disk
test file, the run log.
"""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.continuum.hydra.tests.support.helpers import REPO, fixture_path

pytestmark = pytest.mark.integration

VENV_BIN = os.path.dirname(sys.executable)
UNITS = {"gflops": "GFLOP/s", "gbps": "GB/s", "iops": "IOPS", "us": "us", "mbps": "MB/s", "tflops": "TFLOP/s"}


def fake_nvidia_smi(bindir):
    """Replays recorded output per subcommand; the sampler mode loops the recording until it is killed."""
    script = os.path.join(bindir, "nvidia-smi")
    with open(script, "w") as handle:
        handle.write(
            "#!/bin/sh\n"
            "case \"$*\" in\n"
            "  *--query-gpu*) head -n 1 %s\n"
            "    while true; do tail -n +2 %s | while IFS= read -r line; do echo \"$line\"; sleep 0.02; done; done ;;\n"
            "  topo*) exec cat %s ;;\n"
            "  *-q*) exec cat %s ;;\n"
            "esac\n"
            "exit 0\n" % (fixture_path("nvidia-smi-query", "h100-pcie-350w-lms.csv"),
                          fixture_path("nvidia-smi-query", "h100-pcie-350w-lms.csv"),
                          fixture_path("nvidia-smi-topo", "della-a100-2gpu.txt"), fixture_path("nvidia-smi", "a100-sxm4-v12.xml")))
    os.chmod(script, 0o755)


@pytest.fixture(scope="module")
def profile_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("profile")
    bare = work / "bare-venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(bare)],
                   check=True, timeout=120)
    bindir = work / "bin"
    bindir.mkdir()
    fake_nvidia_smi(str(bindir))
    hosts = {}
    for name, python in (("gpu-node", sys.executable), ("bare-node", str(bare / "bin" / "python"))):
        disk_dir = work / name / "data"
        disk_dir.mkdir(parents=True)
        hosts[name] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": python,
            "hydra_environment": {"PATH": "%s:/usr/bin:/bin" % bindir} if name == "gpu-node" else {"PATH": "/usr/bin:/bin"},
            "hydra_profile_run_log": str(work / name / "run.jsonl"),
            "hydra_profile_benchmark_options": {"cpu": {"matrix_n": 256}, "memory": {"array_mib": 16},
                                                "disk": {"directory": str(disk_dir), "file_size_mib": 4}},
        }
    inventory = work / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    results = work / "results"
    results.mkdir()
    wrapper = work / "run.yml"
    wrapper.write_text(yaml.safe_dump([
        {"import_playbook": os.path.join(REPO, "playbooks", "profile.yml")},
        {"name": "Keep each host's result for the test", "hosts": "all", "gather_facts": False, "tasks": [
            {"name": "Save", "check_mode": False, "delegate_to": "localhost",
             "vars": {"ansible_python_interpreter": sys.executable},
             "ansible.builtin.copy": {"content": "{{ hydra_profile | to_json }}", "dest": str(results) + "/{{ inventory_hostname }}.json",
                                      "mode": "0644"}}]},
    ]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
               HYDRA_REPORT_DIR=str(work / "reports"), ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    extra = {"hydra_profile_warmup_s": 0.05, "hydra_profile_duration_s": 0.2, "hydra_profile_sample_interval_s": 0.05}
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "--check", "-i", str(inventory), str(wrapper),
                           "-e", json.dumps(extra)], env=env, capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = {"stdout": proc.stdout, "work": work}
    for name in hosts:
        out[name] = json.loads((results / (name + ".json")).read_text())
    return out


def test_profile_structure_and_units(profile_run):
    result = profile_run["gpu-node"]
    assert result["changed"] is False and result["schema_version"] == "1.0.0"
    static = result["static_profile"]
    assert set(static) >= {"cpu", "memory", "storage", "os", "runtime", "gpus", "network", "notes"}
    assert static["cpu"]["cores_logical"] >= 1 and static["memory"]["total_bytes"] > 0
    assert [(g["name"], g["sku"]) for g in static["gpus"]] == [("NVIDIA A100-SXM4-80GB", "a100_sxm")]
    assert static["gpu_topology"]["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}
    benches = result["benchmarks"]
    assert benches["cpu_sustained"]["status"] == "ok" and benches["cpu_sustained"]["all_cores_gflops"] > 0
    assert benches["memory_bandwidth"]["status"] == "ok" and benches["memory_bandwidth"]["triad_gbps"] > 0
    disk = benches["disk_random_io"]
    assert disk["status"] == "ok" and disk["o_direct"] is True and disk["read_iops"] > 0 and disk["test_file_removed"] is True
    assert benches["gpu_sustained"]["status"] == "skipped"  # no torch in this virtualenv
    for row in result["benchmark_results"]:
        suffix = row["name"].rsplit("_", 1)[-1]
        assert row["unit"] == UNITS[suffix], row
        assert row["status"] in ("PASS", "WARN", "SKIP", "ERROR")
    assert set(result["analysis"]) >= {"primary_bottleneck", "secondary_bottleneck", "confidence", "reasons", "recommendations"}
    assert set(result["remediation"]) == {"priority", "actions"}
    assert os.listdir(disk["directory"]) == []


def test_telemetry_under_load_from_one_long_lived_nvidia_smi(profile_run):
    result = profile_run["gpu-node"]
    telemetry = result["telemetry"]
    assert telemetry["gpu_source"] == "nvidia-smi" and telemetry["gpu_samples"] > 0 and telemetry["cpu_samples"] > 0
    assert any("NVML is unusable" in note for note in telemetry["notes"])  # pynvml is installed, the driver is not
    for key in ("cpu_sustained", "memory_bandwidth", "disk_random_io"):
        summary = result["benchmarks"][key]["telemetry"]
        (gpu,) = summary["gpus"]
        assert gpu["index"] == 0 and gpu["samples"] > 0 and gpu["sm_clock_min_mhz"] >= 345.0
        assert summary["cpu"]["samples"] >= 1


def test_run_log_has_every_phase_and_the_verdict(profile_run):
    lines = [json.loads(line) for line in (profile_run["work"] / "gpu-node" / "run.jsonl").read_text().splitlines()]
    ends = [(event["phase"], event["status"]) for event in lines if event["event"] == "phase_end"]
    assert ends == [("static_profile", "ok"), ("cpu", "ok"), ("memory", "ok"), ("disk", "ok"), ("gpu", "skipped")]
    assert [event["event"] for event in lines[-2:]] == ["verdict", "run_end"]
    assert "Show the verdict" in profile_run["stdout"]


def test_bare_python_without_numpy_gets_labelled_fallbacks(profile_run):
    result = profile_run["bare-node"]
    benches = result["benchmarks"]
    assert result["static_profile"]["runtime"]["numpy_version"] is None
    assert (benches["cpu_sustained"]["method"], benches["cpu_sustained"]["status"]) == ("stdlib_python", "fallback")
    # No NumPy, but a C compiler: the memory is measured by compiled STREAM, a real triad (the stdlib copy, for a host
    # with neither, is tests/unit/.../bench/test_fallbacks.py's).
    assert (benches["memory_bandwidth"]["method"], benches["memory_bandwidth"]["status"]) == ("c_stream", "ok")
    assert benches["memory_bandwidth"]["triad_gbps"] > 0 and benches["memory_bandwidth"]["copy_gbps"] > 0
    assert benches["disk_random_io"]["status"] == "ok"
    assert result["static_profile"]["gpus"] == [] and result["telemetry"]["gpu_source"] is None
