"""`make gpu-check` (benchmarks/gpu_check.py) where no GPU is: run for real as a process, its tools faked.

The machine without a GPU runs the real no-GPU path. The GPU machine is this one with recorded real outputs
replayed by small executables first on PATH (`nvidia-smi -q -x` of an A100, its `topo -m` and `nvlink --status`, a
DCGM diag document, kernel-log NVRM lines) and a /sys tree laid out under a temporary root; faults are planted by
making a tool hang. The virtualenv, pip, pytest and ansible-playbook runs are real. The torch steps cannot run here
(no GPU): their figures are computed from a worker answer in torch_worker's shape.
"""

import importlib.metadata
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tarfile

import pytest

from ansible_collections.continuum.hydra.benchmarks import gpu_check
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvidia_smi, skus
from ansible_collections.continuum.hydra.tests.support.helpers import REPO, fixture_path, read_fixture

pytestmark = pytest.mark.integration

SCRIPT = os.path.join(REPO, "benchmarks", "gpu_check.py")
SMI_XML = fixture_path("nvidia-smi", "a100-sxm4-v12.xml")
TOPO = fixture_path("nvidia-smi-topo", "della-a100-2gpu.txt")
NVLINK = fixture_path("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt")
NVLINK_ERRORS = fixture_path("ml-engineering", "nvidia-smi-nvlink-e-h100.txt")  # doctor's gpu.nvlink_errors reads it
DCGM = fixture_path("dcgm-diag", "virtualclient", "t4-dcgm31-r2-healthy.json")
KERNEL_LOG = fixture_path("kernel-log", "nvrm-xid-lines.txt")
DRIVER_VERSION = fixture_path("proc-driver-nvidia", "version-515.76.txt")
MACHINE = "nvidia-a100-sxm4-80gb-x1"
GPU_STEPS = ("env", "gpu_tests", "p7_gpu", "p7_allreduce", "doctor_standard", "doctor_deep", "profile")


def tool(bindir, name, body):
    path = os.path.join(str(bindir), name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


def fake_tools(bindir, hang_dcgmi=False):
    """nvidia-smi answering exactly what the recording runs (anything else fails loudly), dcgmi, journalctl."""
    bindir.mkdir(exist_ok=True)
    q = shlex.quote
    tool(bindir, "nvidia-smi", 'case "$*" in\n  "-q -x") exec cat %s ;;\n  "topo -m") exec cat %s ;;\n'
                               '  "nvlink --status") exec cat %s ;;\n  "nvlink -e") exec cat %s ;;\nesac\n'
                               'echo "fake nvidia-smi: unexpected arguments: $*" >&2\nexit 2\n'
                               % (q(SMI_XML), q(TOPO), q(NVLINK), q(NVLINK_ERRORS)))
    tool(bindir, "dcgmi", "exec sleep 600\n" if hang_dcgmi else '[ "$*" = "diag -r 1 -j" ] || exit 9\nexec cat %s\n' % q(DCGM))
    tool(bindir, "journalctl", "exec cat %s\n" % q(KERNEL_LOG))
    return bindir


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def gpu_root(root):
    """/sys and /proc of a host with the recorded A100 (bus and link as its nvidia-smi -q -x states them) behind a
    bridge, an InfiniBand NIC beside it, two NUMA nodes; /proc/driver/nvidia/version recorded on a real host."""
    gpu = nvidia_smi.parse_nvidia_smi(read_fixture("nvidia-smi", "a100-sxm4-v12.xml"))["gpus"][0]
    address = gpu["pci_bus_id"][4:].lower()  # 00000000:01:00.0 -> 0000:01:00.0
    bridge = root / "sys/devices/pci0000:00/0000:00:01.0"
    speed = "16.0 GT/s PCIe"  # Gen4, the recording's current and max generation
    for name, value in (("vendor", "0x10de"), ("device", "0x20b2"), ("class", "0x030200"), ("numa_node", "0"),
                        ("local_cpulist", "0-63"), ("current_link_speed", speed), ("max_link_speed", speed),
                        ("current_link_width", str(gpu["pcie"]["width_current"])), ("max_link_width", str(gpu["pcie"]["width_max"]))):
        write(bridge / address / name, value)
    for name, value in (("vendor", "0x8086"), ("class", "0x060400"), ("current_link_speed", speed), ("current_link_width", "16")):
        write(bridge / name, value)
    nic = root / "sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0"
    for name, value in (("vendor", "0x15b3"), ("class", "0x020700"), ("numa_node", "1")):
        write(nic / name, value)
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    (root / "sys/bus/pci/devices" / address).symlink_to("../../../devices/pci0000:00/0000:00:01.0/" + address)
    (root / "sys/bus/pci/devices/0000:02:00.0").symlink_to("../../../devices/pci0000:00/0000:00:02.0/0000:02:00.0")
    (root / "sys/class/infiniband/mlx5_0").mkdir(parents=True)
    (root / "sys/class/infiniband/mlx5_0/device").symlink_to("../../../devices/pci0000:00/0000:00:02.0/0000:02:00.0")
    write(root / "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE")
    write(root / "sys/class/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)")
    for node, cpus, distance in ((0, "0-63", "10 32"), (1, "64-127", "32 10")):
        write(root / ("sys/devices/system/node/node%d/cpulist" % node), cpus)
        write(root / ("sys/devices/system/node/node%d/distance" % node), distance)
    write(root / "sys/devices/system/node/online", "0-1")
    write(root / "proc/driver/nvidia/version", read_fixture("proc-driver-nvidia", "version-515.76.txt").rstrip("\n"))
    return root, address


def no_gpu_root(root):
    """The CI machine's PCI functions (tests/fixtures/sysfs/kvm-virtio-host-pci.txt): no NVIDIA device."""
    for line in read_fixture("sysfs", "kvm-virtio-host-pci.txt").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        address, vendor, device, pci_class = line.split()
        for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
            write(root / "sys/bus/pci/devices" / address / name, value)
    return root


def run_check(tmp_path, bindir, *args, python=sys.executable, timeout=300):
    """The script as `make gpu-check` runs it; (rc, summary printed on stdout, stderr lines)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "collections"), PATH="%s:/usr/bin:/bin" % bindir)
    done = subprocess.run([python, SCRIPT, "--out", str(tmp_path / "out")] + list(args), capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)
    summary = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, summary, done.stderr.splitlines()


def steps(summary):
    return dict((step["name"], step) for step in summary["steps"])


def nvrm_lines(path):
    with open(path) as handle:
        return [line for line in handle.read().splitlines() if "NVRM" in line]


def test_without_a_gpu_one_line_says_so_the_recording_runs_and_the_exit_status_is_0(tmp_path):
    bindir = fake_tools(tmp_path / "bin")
    os.remove(bindir / "nvidia-smi")
    os.remove(bindir / "dcgmi")
    root = no_gpu_root(tmp_path / "root")
    rc, summary, stderr = run_check(tmp_path, bindir, "--sys-root", str(root))
    assert rc == 0, stderr
    said = [line for line in stderr if "no NVIDIA GPU on this machine" in line]
    assert said == ["gpu-check: no NVIDIA GPU on this machine (nvidia-smi not found on PATH (no NVIDIA driver installed?)): "
                    "the GPU steps are skipped, the machine is recorded"]
    assert summary["gpu"]["present"] is False and summary["ok"] is True
    assert summary["totals"] == {"passed": 1, "failed": 0, "skipped": 7}
    by_name = steps(summary)
    assert by_name["record"]["status"] == "passed"
    for name in GPU_STEPS:
        assert by_name[name]["status"] == "skipped" and by_name[name]["reason"].startswith("no NVIDIA GPU (nvidia-smi not found")
    recording = tmp_path / "out" / summary["machine"]
    assert summary["recording_dir"] == str(recording) and summary["machine"].startswith("no-gpu-")
    assert sorted(os.listdir(recording)) == ["README.md", "kernel-log-nvrm.txt", "manifest.json", "sysfs.json"]
    assert nvrm_lines(recording / "kernel-log-nvrm.txt") == nvrm_lines(KERNEL_LOG)
    listed = dict((entry["file"], entry) for entry in summary["recording"])
    assert listed["nvidia-smi-q-x.xml"]["status"] == "skipped" and listed["nvml.json"]["reason"] == "no NVIDIA GPU"
    assert listed["sysfs.json"]["status"] == "recorded"
    assert json.loads((recording / "sysfs.json").read_text())["pci_functions"] == []
    with open(tmp_path / "out" / "summary.json") as handle:
        assert json.load(handle) == summary


def test_a_gpu_machine_is_recorded_file_by_file_and_the_summary_lists_every_file(tmp_path):
    bindir = fake_tools(tmp_path / "bin")
    root, address = gpu_root(tmp_path / "root")
    rc, summary, stderr = run_check(tmp_path, bindir, "--steps", "env,record,p7_gpu,p7_allreduce", "--torch-budget", "0", "--sys-root", str(root),
                                    "--venv", str(tmp_path / "venv"))
    assert rc == 0, stderr
    assert summary["gpu"]["present"] is True and summary["gpu"]["count"] == 1 and summary["machine"] == MACHINE
    by_name = steps(summary)
    env = by_name["env"]
    assert env["status"] == "passed" and env["figures"]["python"] == str(tmp_path / "venv" / "bin" / "python")
    # The new virtualenv sees this interpreter's packages (a .pth line), so nothing had to be installed.
    assert env["figures"]["packages"]["ansible-core"] == importlib.metadata.version("ansible-core")
    assert env["figures"]["missing"] == {"torch": "torch is not importable by %s; --torch-budget 0: no install tried"
                                         % env["figures"]["python"]}
    for name in ("p7_gpu", "p7_allreduce"):
        assert by_name[name]["status"] == "skipped" and by_name[name]["reason"] == "needs torch: " + env["figures"]["missing"]["torch"]
    assert by_name["record"]["status"] == "passed"

    recording = tmp_path / "out" / MACHINE
    written = {"nvidia-smi-q-x.xml": SMI_XML, "nvidia-smi-topo-m.txt": TOPO, "nvidia-smi-nvlink-status.txt": NVLINK,
               "dcgmi-diag-r1.json": DCGM, "proc-driver-nvidia-version.txt": DRIVER_VERSION}
    for name, source in written.items():
        with open(source) as handle:
            assert (recording / name).read_text() == handle.read(), name
    assert nvrm_lines(recording / "kernel-log-nvrm.txt") == nvrm_lines(KERNEL_LOG)
    # An NVIDIA tool that fails is recorded too, with its exit status: the fake knows no --errorcounters.
    manifest = dict((entry["file"], entry) for entry in json.loads((recording / "manifest.json").read_text()))
    assert manifest["nvidia-smi-nvlink-errorcounters.txt"]["rc"] == 2
    assert "unexpected arguments: nvlink --errorcounters" in manifest["nvidia-smi-nvlink-errorcounters.txt"]["stderr"]
    # NVML through the real pynvml: this machine has no NVML library, and the recording says so.
    nvml = json.loads((recording / "nvml.json").read_text())
    assert nvml["status"] == "ok" and nvml["available"] is False and "NVML" in nvml["error"]

    sysfs = json.loads((recording / "sysfs.json").read_text())
    assert sysfs["pci_functions"] == [address, "0000:02:00.0"]
    files = sysfs["files"]
    assert files["/sys/bus/pci/devices/%s/current_link_speed" % address] == "16.0 GT/s PCIe"
    assert files["/sys/bus/pci/devices/%s/max_link_width" % address] == "16"
    assert files["/sys/devices/pci0000:00/0000:00:01.0/class"] == "0x060400"  # the bridge above the GPU
    assert files["/sys/class/infiniband/mlx5_0/ports/1/rate"] == "200 Gb/sec (4X HDR)"
    assert files["/sys/bus/pci/devices/0000:02:00.0/numa_node"] == "1"
    assert files["/sys/devices/system/node/node1/distance"] == "32 10"
    assert sysfs["links"]["/sys/class/infiniband/mlx5_0/device"] == "../../../devices/pci0000:00/0000:00:02.0/0000:02:00.0"

    on_disk = sorted(os.listdir(recording))
    expected = sorted(list(written) + ["kernel-log-nvrm.txt", "nvidia-smi-nvlink-errorcounters.txt", "nvml.json", "sysfs.json"])
    assert on_disk == sorted(expected + ["README.md", "manifest.json"])
    assert sorted(entry["file"] for entry in summary["recording"]) == expected
    assert all(entry["status"] == "recorded" for entry in summary["recording"])
    readme = (recording / "README.md").read_text()
    assert all("`%s`" % name in readme for name in expected) and "1 x NVIDIA A100-SXM4-80GB (driver 535.54.03" in readme
    with tarfile.open(summary["archive"]) as archive:
        members = archive.getnames()
    assert "summary.json" in members and all("%s/%s" % (MACHINE, name) in members for name in expected + ["README.md"])


def test_a_failing_step_fails_the_run_and_the_later_steps_still_run(tmp_path):
    bindir = fake_tools(tmp_path / "bin", hang_dcgmi=True)
    root, _address = gpu_root(tmp_path / "root")
    rc, summary, stderr = run_check(tmp_path, bindir, "--steps", "record,gpu_tests,doctor_standard", "--python", sys.executable,
                                    "--command-timeout", "2", "--sys-root", str(root))
    assert rc == 1, stderr
    by_name = steps(summary)
    record = by_name["record"]
    assert record["status"] == "failed" and record["reason"] == "dcgmi-diag-r1.json: %s diag -r 1 -j timed out after 2s" % (bindir / "dcgmi")
    assert "nvidia-smi-q-x.xml" in record["files"] and "dcgmi-diag-r1.json" not in record["files"]
    # The gpu tests ran for real: without /dev/nvidiactl the suite skips them all, which proves nothing: failed.
    tests = by_name["gpu_tests"]
    assert tests["status"] == "failed" and tests["reason"].startswith("every gpu test was skipped")
    assert tests["figures"]["test_files"] == gpu_check.gpu_test_files()
    assert tests["figures"]["passed"] == 0 and tests["figures"]["skipped"] == tests["figures"]["tests"] >= len(tests["figures"]["test_files"])
    # doctor.yml ran after both failures, on the faked A100: its checks judged, none unreadable.
    doctor = by_name["doctor_standard"]
    assert doctor["status"] == "passed", doctor.get("reason")
    assert doctor["figures"]["level"] == "standard" and doctor["figures"]["summary"]["ERROR"] == 0
    xid = [check for check in doctor["figures"]["not_passed"] if check["id"] == "gpu.xid_errors"]
    assert xid and xid[0]["status"] == "FAIL"  # the recorded NVRM Xid lines, read through the faked journalctl
    assert os.path.exists(tmp_path / "out" / "steps" / "doctor_standard" / "fleet-report.json")
    assert summary["ok"] is False and summary["totals"] == {"passed": 1, "failed": 2, "skipped": 5}


def test_without_ansible_core_and_no_index_the_playbooks_are_skipped_with_the_reason(template_venv, tmp_path):
    # A bare virtualenv runs the check: its own virtualenv then sees only the base interpreter's packages.
    bare = str(template_venv / "bin" / "python")
    base = os.path.join(sys.base_prefix, "bin", "python3")
    if subprocess.run([base, "-c", "import ansible"], capture_output=True, check=False).returncode == 0:
        pytest.skip("%s has ansible-core: nothing would be missing" % base)
    bindir = fake_tools(tmp_path / "bin")
    root, _address = gpu_root(tmp_path / "root")
    wheels = tmp_path / "wheels"
    wheels.mkdir()  # an offline machine's carried wheels, without ansible-core
    rc, summary, stderr = run_check(tmp_path, bindir, "--steps", "env,doctor_standard,doctor_deep,profile", "--torch-budget", "0",
                                    "--wheels", str(wheels), "--sys-root", str(root), "--venv", str(tmp_path / "venv"), python=bare)
    assert rc == 0, stderr
    by_name = steps(summary)
    missing = by_name["env"]["figures"]["missing"]["ansible-core"]
    assert missing.startswith("pip install ansible-core>=2.19,<2.20") and "failed" in missing
    for name in ("doctor_standard", "doctor_deep"):
        assert by_name[name]["status"] == "skipped" and by_name[name]["reason"] == "needs ansible-core: " + missing
    assert by_name["profile"]["reason"].startswith("needs ansible-core, torch: %s; torch is not importable" % missing)


def test_pack_leaves_the_summary_and_the_archive_alone(tmp_path):
    bindir = fake_tools(tmp_path / "bin")
    root, _address = gpu_root(tmp_path / "root")
    rc, summary, stderr = run_check(tmp_path, bindir, "--steps", "record", "--pack", "--sys-root", str(root))
    assert rc == 0, stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["gpu-check-%s.tar.gz" % MACHINE, "summary.json"]
    with tarfile.open(summary["archive"]) as archive:
        members = archive.getnames()
        packed = json.load(archive.extractfile("summary.json"))
    assert "%s/nvidia-smi-q-x.xml" % MACHINE in members and "%s/manifest.json" % MACHINE in members
    assert packed["recording"] == summary["recording"] and packed["steps"] == summary["steps"]


@pytest.mark.parametrize("args, message", [
    (["--steps", "record,bogus"], "--steps 'bogus': accepted: env, record, gpu_tests, p7_gpu, p7_allreduce, doctor_standard, "
                                  "doctor_deep, profile"),
    (["--step-timeout", "record=soon"], "--step-timeout 'record=soon': give NAME=SECONDS with SECONDS a number above 0"),
    (["--step-timeout", "tests=10"], "--step-timeout 'tests=10': the step is one of env, record, gpu_tests"),
    (["--budget", "0"], "--budget 0.0: give a number of seconds above 0"),
    (["--sys-root", "/nonexistent"], "--sys-root '/nonexistent': holds neither sys/ nor proc/"),
    (["--download-wheels", "wheels", "--wheels-python", "three"], "--wheels-python 'three': give the GPU machine's Python as 3.N"),
    (["--download-wheels", "wheels", "--wheels-packages", "torch"],
     "--wheels-packages torch: accepted: ansible-core, pytest, nvidia-ml-py, numpy"),
])
def test_a_bad_argument_is_one_line_naming_it_and_what_is_accepted(tmp_path, args, message):
    rc, summary, stderr = run_check(tmp_path, tmp_path, *args)
    assert rc == 2 and summary is None and len(stderr) == 1
    assert stderr[0].startswith("gpu-check: error: " + message)
    assert not os.path.exists(tmp_path / "out")


# ---- P7's figures from the worker's answer (the torch steps themselves need a GPU)

def test_p7_figures_take_the_link_the_gpu_reported_under_load_and_the_skus_peak():
    recorded = nvidia_smi.parse_nvidia_smi(read_fixture("nvidia-smi", "a100-sxm4-v12.xml"))["gpus"][0]
    pcie = recorded["pcie"]
    # NVML rows as telemetry.NvmlSource writes them: idle at Gen1 first, then the recorded link under load; another
    # GPU's faster row is not this GPU's.
    rows = [{"pci_bus_id": recorded["pci_bus_id"], "pcie_gen": 1, "pcie_width": pcie["width_current"], "pcie_gen_max": pcie["gen_max"],
             "pcie_width_max": pcie["width_max"]},
            {"pci_bus_id": recorded["pci_bus_id"], "pcie_gen": pcie["gen_current"], "pcie_width": pcie["width_current"],
             "pcie_gen_max": pcie["gen_max"], "pcie_width_max": pcie["width_max"]},
            {"pci_bus_id": "00000000:41:00.0", "pcie_gen": 5, "pcie_width": 16}]
    answer = {"index": 0, "name": recorded["name"], "pci_bus_id": "0000:01:00.0", "bf16_tflops": 250.0,
              "pcie": {"h2d_gbps": 24.5, "d2h_gbps": 25.1, "link_under_load": {"gen_min": 1, "width_min": 16, "gen_max": 4, "width_max": 16}}}
    figures = gpu_check.p7_gpu_figures(answer, rows)
    sku = skus.find_sku(recorded["name"])
    assert figures["sku"] == sku["id"] and figures["bf16_peak_tflops"] == sku["bf16_tflops_peak"]
    assert figures["bf16_ratio_of_peak"] == round(250.0 / sku["bf16_tflops_peak"], 3)
    assert (figures["link"]["gen"], figures["link"]["width"], figures["link"]["samples"]) == (pcie["gen_current"], pcie["width_current"], 2)
    rate = skus.link_rate_gbps(pcie["gen_current"], pcie["width_current"])
    assert figures["link_rate_gbps"] == round(rate, 2) and figures["h2d_ratio_of_link"] == round(24.5 / rate, 3)
    # No telemetry row for the GPU: the link's maximum as sysfs states it (the worker's reading), and it says so.
    fallback = gpu_check.p7_gpu_figures(answer, rows[2:])
    assert fallback["link"]["source"].startswith("sysfs max_link_speed") and fallback["link"]["gen"] == 4
    # A step the worker could not run is an error, not a figure.
    failed = gpu_check.p7_gpu_figures(dict(answer, bf16_tflops={"error": "RuntimeError: CUDA error"}), rows)
    assert failed["bf16_tflops"] is None and failed["errors"] == {"bf16_tflops": "RuntimeError: CUDA error"}


def test_the_allreduce_is_compared_with_the_skus_ring_figure_else_the_slowest_pcie_link():
    h100 = "NVIDIA H100 80GB HBM3"
    reference, source = gpu_check.allreduce_reference([h100, h100], [])
    assert reference == skus.find_sku(h100)["allreduce_busbw_gbps"] and source.startswith("H100 SXM NVLink ring")
    # An A100 PCIe has no ring figure in the table: the slowest GPU's link is the bound.
    pcie = "NVIDIA A100-PCIE-40GB"
    assert skus.find_sku(pcie) is not None and skus.find_sku(pcie).get("allreduce_busbw_gbps") is None
    reference, source = gpu_check.allreduce_reference([pcie, pcie], [31.5, 15.75])
    assert reference == 15.75 and source.startswith("the slowest GPU's PCIe link rate")
    assert gpu_check.allreduce_reference([pcie, pcie], []) == (None, "no SKU figure and no measured PCIe link")
    # Mixed SKUs: no one ring figure.
    assert gpu_check.allreduce_reference([h100, pcie], [63.0, 31.5])[0] == 31.5
