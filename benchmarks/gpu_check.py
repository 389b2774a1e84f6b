# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make gpu-check`: the collection's GPU side proven on a real GPU machine, in one command of at most 8 minutes.

Steps, in this order (each under its own deadline, and never stopping at a failed one):

1. ``env``: a virtualenv (``build/gpu-check-venv``) that sees the machine's own packages (``--system-site-packages``,
   and the site-packages of the virtualenv this script runs in, when it runs in one); what it lacks of ansible-core,
   pytest, nvidia-ml-py and NumPy (pins from tests/requirements.txt) is installed from ``--wheels`` or the package
   index under a bounded pip, then torch, only when missing, within ``--torch-budget`` seconds. A package that
   cannot be had leaves the steps needing it SKIPPED with the reason.
2. ``record``: the machine's real outputs into one folder, ready to become ``tests/fixtures/<machine>/``:
   ``nvidia-smi -q -x``, ``topo -m``, ``nvlink --status`` / ``--errorcounters`` (-s / -e), ``dcgmi diag -r 1 -j``, NVML
   readings, the kernel log's NVIDIA lines, /proc/driver/nvidia/version and the /sys PCIe and NUMA files of the GPUs,
   NVSwitches and NICs, with a manifest and a README.
3. ``gpu_tests``: every ``gpu``-marked test (``pytest -m gpu``).
4. ``p7_gpu``: per GPU, bf16 dense matmul TFLOP/s / the SKU's published peak (_host/gpus/skus.py) and pinned
   host-to-device GB/s / the rate of the PCIe link as the GPU reports it (NVML or nvidia-smi, sampled while the
   copies run): the torch worker of doctor's active checks (_host/measure/torch_worker.py, mode "active").
5. ``p7_allreduce``: the catalogue's all-reduce workload (workloads/, NCCL over every GPU found; two or more).
6. ``doctor_standard``, ``doctor_deep``: ``playbooks/doctor.yml`` on localhost at those levels (deep: DCGM diag at
   ``-r 1`` and the active checks, with timeouts that fit the step).
7. ``profile``: ``playbooks/profile.yml`` with the GPU benchmark only.

Then one JSON summary on stdout (every step: passed / failed / skipped, its figures, its seconds), summary.json, the
recording and the step logs in ``--out`` and packed as one .tar.gz; exit status 1 when a step failed, 2 for bad
arguments. Without an NVIDIA GPU one line says so, the GPU steps are SKIPPED and the exit status is 0.

    make gpu-check [GPU_CHECK_OUT=DIR] [GPU_CHECK_ARGS="--pack --wheels DIR ..."]
    PYTHONPATH=collections python3 benchmarks/gpu_check.py --help

docs/gpu-check.md says how to run it on a borrowed GPU machine and how the recordings become fixtures.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import socket
import sys
import tarfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _atomic
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import dcgm as dcgm_probe
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import gpu as gpu_probes
from ansible_collections.continuum.hydra.plugins.module_utils._host import command, pci, telemetry
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvidia_smi, skus
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import torch_worker
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, PASS, READ_ABSENT, READ_OK
from ansible_collections.continuum.hydra.plugins.module_utils._workload.run import parse_performance

# realpath: run through collections/, __file__ names the link, not the checkout.
REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
COLLECTIONS = os.path.join(REPO, "collections")

# A step's outcome, in the words (not check statuses: a step is a piece of this run); a recorded file is
# RECORDED (its command ran to the end, whatever its exit status: a failing tool's output is a real recording too),
# FAILED (no output: timed out, could not run) or SKIPPED (the tool is not there).
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
RECORDED = "recorded"

# The whole run's deadline by default: under 8 minutes with room for Python's start and the packing.
DEFAULT_BUDGET_S = 450.0
# Kept back from every step for writing the summary, the README and the archive.
FINISH_RESERVE_S = 10.0
# A step with less time than this left is SKIPPED (out of time) rather than started to be killed.
MIN_STEP_S = 5.0
# torch from the package index when the machine lacks it: a CUDA build is gigabytes; past this, SKIP with the reason.
DEFAULT_TORCH_BUDGET_S = 180.0
# pip for the small packages (ansible-core and friends), and each pip connection's own timeout.
PIP_BUDGET_S = 60.0
PIP_CONNECT_TIMEOUT_S = 10
# The recording's commands, unless --command-timeout: nvidia-smi's reader default; dcgmi -r 1's own.
SMI_TIMEOUT_S = float(nvidia_smi.DEFAULT_TIMEOUT)
DCGM_LEVEL = 1
# Telemetry interval while the P7 worker runs: the link is read many times during its copies.
SAMPLE_INTERVAL_S = 0.2

VENV = os.path.join(REPO, "build", "gpu-check-venv")
REQUIREMENTS = os.path.join(REPO, "tests", "requirements.txt")
# What the steps import, by distribution name -> module name; the specs come from tests/requirements.txt.
PACKAGES = {"ansible-core": "ansible", "pytest": "pytest", "nvidia-ml-py": "pynvml", "numpy": "numpy"}
TORCH = "torch"
ALLREDUCE_WORKLOAD = "allreduce_multi_gpu"  # workloads/models.json: the NCCL all-reduce over the local GPUs


class Step:
    """One piece of the check: its deadline, whether it needs a GPU, the packages it imports, its function."""

    def __init__(self, name: str, cap_s: float, needs_gpu: bool, needs: Sequence[str], run: Callable[..., dict[str, Any]],
                 what: str) -> None:
        self.name, self.cap_s, self.needs_gpu, self.needs, self.run, self.what = name, cap_s, needs_gpu, tuple(needs), run, what


class BadArguments(Exception):
    """An argument the check cannot use; the message names it and what is accepted."""


# ---------------------------------------------------------------------------------------------------------------
# Small helpers


def log(message: str) -> None:
    sys.stderr.write("gpu-check: %s\n" % message)
    sys.stderr.flush()


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "unknown"


def figure(value: Any) -> Optional[float]:
    """A finite number, else None (a worker's step that failed answers {"error": ...})."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def ratio(measured: Optional[float], reference: Optional[float]) -> Optional[float]:
    return round(measured / reference, 3) if measured is not None and reference else None


def child_env(**extra: str) -> dict[str, str]:
    """This environment for a child, the collection importable; CI unset (the test suite's CI mode wants tools a
    GPU machine has no use for)."""
    env = dict(os.environ, PYTHONPATH=COLLECTIONS, ANSIBLE_NOCOLOR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("CI", None)
    env.update(extra)
    return env


def tail(path: str, lines: int = 3) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])[:400]


def run_logged(argv: Sequence[str], timeout: float, log_path: str, env: Optional[Mapping[str, str]] = None) -> tuple[Optional[int], bool]:
    """A command with its output in log_path, killed with its process group at the deadline: (rc, timed_out)."""
    with open(log_path, "a") as handle:
        handle.write("$ %s\n" % " ".join(argv))
    try:
        return command.run_to_file(list(argv), timeout, log_path, cwd=REPO, env=env or child_env())
    except (ProbeAbsent, ProbeError) as exc:
        with open(log_path, "a") as handle:
            handle.write("%s\n" % exc)
        return 127, False


# ---------------------------------------------------------------------------------------------------------------
# The run: arguments, what was found, and the steps' results


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.deadline = self.started + args.budget
        self.started_at = now_utc()
        self.host = socket.gethostname()
        self.sys_root = args.sys_root
        self.gpu: dict[str, Any] = {}
        self.smi_xml: Optional[tuple[int, str, str, float]] = None  # rc, stdout, stderr, seconds of `-q -x`
        self.python: str = args.python or sys.executable
        self.venv: Optional[str] = None
        self.packages: Optional[dict[str, Optional[str]]] = None
        self.missing_reason: dict[str, str] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.manifest: list[dict[str, Any]] = []
        self.out_dir = ""
        self.recording_dir = ""
        self.steps_dir = ""

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def machine(self) -> str:
        names = self.gpu.get("names") or []
        if not names:
            return "no-gpu-" + slug(self.host)
        return "%s-x%d" % (slug(names[0]), len(names))

    def record_file(self, name: str, what: str, text: Optional[str], status: str, reason: Optional[str] = None,
                    rc: Optional[int] = None, seconds: Optional[float] = None, stderr: Optional[str] = None) -> None:
        """One file of the recording (written when there is text) and its manifest entry."""
        entry: dict[str, Any] = {"file": name, "what": what, "status": status, "reason": reason, "rc": rc,
                                 "seconds": None if seconds is None else round(seconds, 3)}
        if text is not None:
            _atomic.write_atomic(os.path.join(self.recording_dir, name), text)
            entry["bytes"] = len(text.encode("utf-8"))
        if stderr and stderr.strip():
            entry["stderr"] = stderr.strip()[-2000:]
        self.manifest = [item for item in self.manifest if item["file"] != name] + [entry]


# ---------------------------------------------------------------------------------------------------------------
# GPU detection: nvidia-smi -q -x (kept: it is the recording's first file) and the PCI bus


def detect_gpus(run: Run) -> None:
    info: dict[str, Any] = {"present": False, "count": 0, "names": [], "pci_bus_ids": [], "driver_version": None,
                            "cuda_version": None, "nvidia_smi": None, "reason": None, "pci_functions": []}
    problems = []
    try:
        binary = nvidia_smi.find_nvidia_smi()
    except (ProbeAbsent, ProbeError) as exc:
        binary = None
        problems.append(str(exc))
    if binary:
        info["nvidia_smi"] = binary
        start = time.monotonic()
        try:
            rc, out, err = command.run([binary, "-q", "-x"], run.args.command_timeout or SMI_TIMEOUT_S)
            run.smi_xml = (rc, out, err, time.monotonic() - start)
            parsed = nvidia_smi.parse_nvidia_smi(out) if rc == 0 else None
            if parsed is None:
                problems.append("nvidia-smi -q -x exited with rc %s: %s" % (rc, nvidia_smi.first_line(err, out)))
            else:
                gpus = parsed.get("gpus") or []
                info.update(names=[g.get("name") for g in gpus], pci_bus_ids=[g.get("pci_bus_id") for g in gpus],
                            driver_version=parsed.get("driver_version"), cuda_version=parsed.get("cuda_version"))
                if not gpus:
                    problems.append("nvidia-smi -q -x lists no GPU")
        except (ProbeAbsent, ProbeError, nvidia_smi.NvidiaSmiParseError) as exc:
            problems.append("nvidia-smi -q -x: %s" % exc)
    devices_dir = os.path.join(run.sys_root, "sys/bus/pci/devices")
    try:
        # No such folder in some sandboxes (gVisor): nvidia-smi alone then says whether there is a GPU.
        if os.path.isdir(devices_dir):
            info["pci_functions"] = [f["address"] for f in pci.scan_nvidia_functions(devices_dir)["gpus"]]
    except OSError as exc:
        problems.append("cannot list %s: %s" % (devices_dir, exc.strerror or exc))
    info["count"] = len(info["names"])
    # A GPU on the bus that nvidia-smi cannot show is a GPU machine with a problem, not a machine without a GPU.
    info["present"] = bool(info["names"]) or bool(info["pci_functions"])
    info["reason"] = "; ".join(problems) or None
    run.gpu = info


# ---------------------------------------------------------------------------------------------------------------
# env: the virtualenv and what the steps import

INSPECT_SOURCE = r"""
import importlib.util, json, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
found = {}
for dist, module in json.loads(sys.argv[1]).items():
    spec = importlib.util.find_spec(module)
    version = None
    if spec is not None and metadata is not None:
        try:
            version = metadata.version(dist)
        except Exception:
            version = "unknown"
    found[dist] = None if spec is None else (version or "unknown")
print(json.dumps(found))
"""


def inspect_packages(python: str, timeout: float = 60.0) -> dict[str, Optional[str]]:
    """{distribution: version or None} as ``python`` sees them (found, not imported: torch takes seconds to import)."""
    wanted = dict(PACKAGES, **{TORCH: TORCH})
    try:
        rc, out, err = command.run([python, "-c", INSPECT_SOURCE, json.dumps(wanted)], timeout, env={"PYTHONPATH": COLLECTIONS})
        found = json.loads(out.strip().splitlines()[-1]) if rc == 0 and out.strip() else None
    except (ProbeAbsent, ProbeError, ValueError) as exc:
        raise ProbeError("cannot ask %s what it imports: %s" % (python, exc)) from None
    if not isinstance(found, dict):
        raise ProbeError("cannot ask %s what it imports: rc %s: %s" % (python, rc, nvidia_smi.first_line(err, out)))
    return found


def requirement_specs(path: str = REQUIREMENTS) -> dict[str, str]:
    """The pip spec of each package the check installs, as `make test` pins it (tests/requirements.txt)."""
    specs = dict((name, name) for name in PACKAGES)
    try:
        with open(path) as handle:
            for line in handle:
                spec = line.split("#", 1)[0].strip()
                name = re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower()
                if name in specs:
                    specs[name] = spec
    except OSError:
        pass
    return specs


def make_venv(run: Run, venv: str, timeout: float, log_path: str) -> str:
    """The virtualenv's python, made when missing: the machine's site-packages visible, and this interpreter's own
    when it runs in a virtualenv (a .pth line: --system-site-packages only reaches the base interpreter's)."""
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python):
        try:
            if command.run([python, "-c", "import sys"], 30)[0] == 0:
                return python
        except (ProbeAbsent, ProbeError):
            pass
        shutil.rmtree(venv, ignore_errors=True)
    rc, timed_out = run_logged([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], timeout, log_path)
    if rc != 0:
        raise ProbeError("cannot create the virtualenv %s: %s" % (venv, "timed out" if timed_out else tail(log_path, 1)))
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        import site  # pylint: disable=import-outside-toplevel

        parents = [path for path in site.getsitepackages() if path.startswith(sys.prefix)]
        rc, out, err = command.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 30)
        purelib = out.strip()
        if rc != 0 or not purelib:
            raise ProbeError("cannot find the virtualenv's site-packages: %s" % nvidia_smi.first_line(err, out))
        lines = "".join("import site; site.addsitedir(%r)\n" % path for path in parents)
        _atomic.write_atomic(os.path.join(purelib, "hydra-gpu-check-parent.pth"), lines)
    return python


def pip_install(run: Run, spec: str, timeout: float, log_path: str) -> Optional[str]:
    """pip install one package into the virtualenv (from --wheels only, when given); None when it worked, else why not."""
    start = time.monotonic()
    if timeout < 1:
        return "pip install %s: no time left of the env step" % spec
    try:
        has_pip = command.run([run.python, "-m", "pip", "--version"], 30)[0] == 0
    except (ProbeAbsent, ProbeError):
        has_pip = False
    if not has_pip:
        rc, timed_out = run_logged([run.python, "-m", "ensurepip", "--default-pip"], min(timeout, 60), log_path)
        if rc != 0:
            return "no pip: %s has no pip module and ensurepip failed (%s)" % (run.python, "timed out" if timed_out else tail(log_path, 1))
    source = ["--no-index", "--find-links", run.args.wheels] if run.args.wheels else []
    argv = [run.python, "-m", "pip", "install", "--no-input", "--progress-bar", "off", "--timeout", str(PIP_CONNECT_TIMEOUT_S),
            "--retries", "1"] + source + [spec]
    rc, timed_out = run_logged(argv, max(1.0, timeout - (time.monotonic() - start)), log_path)
    if timed_out:
        return "pip install %s did not finish within %ds" % (spec, timeout)
    if rc != 0:
        return "pip install %s failed: %s" % (spec, tail(log_path, 1))
    return None


def step_env(run: Run, timeout: float) -> dict[str, Any]:
    log_path = os.path.join(run.steps_dir, "env.log")
    end = time.monotonic() + timeout
    figures: dict[str, Any] = {}
    if run.args.python:
        figures.update(python=run.python, note="--python: used as it is, nothing installed into it")
    else:
        venv = os.path.abspath(run.args.venv)
        try:
            run.python = make_venv(run, venv, min(60.0, timeout), log_path)
        except ProbeError as exc:
            # The machine's Python as it is, rather than nothing: the steps then say what it lacks.
            run.packages = None
            return {"status": FAILED, "reason": "%s; the steps run with %s as it is" % (exc, run.python), "log": "steps/env.log"}
        run.venv = venv
        figures.update(python=run.python, venv=venv)
    run.packages = inspect_packages(run.python, max(5.0, end - time.monotonic()))
    figures["found"] = dict(run.packages)
    missing = [name for name in PACKAGES if not run.packages.get(name)]
    torch_wanted = not run.packages.get(TORCH)
    if run.args.python:
        for name in missing + ([TORCH] if torch_wanted else []):
            run.missing_reason[name] = "%s is not importable by %s (--python: nothing installed)" % (name, run.python)
    else:
        specs = requirement_specs()
        # The small packages first, one pip each (one that cannot be had must not stop the others), leaving torch its budget.
        pip_end = min(time.monotonic() + PIP_BUDGET_S, end - (max(0.0, run.args.torch_budget) if torch_wanted else 0.0))
        for name in missing:
            run.missing_reason[name] = pip_install(run, specs[name], pip_end - time.monotonic(), log_path) or "not importable after pip"
        if torch_wanted and run.args.torch_budget <= 0:
            run.missing_reason[TORCH] = "torch is not importable by %s; --torch-budget 0: no install tried" % run.python
        elif torch_wanted:
            budget = min(run.args.torch_budget, end - time.monotonic())
            log("torch is missing: pip install torch, at most %ds" % budget)
            problem = pip_install(run, TORCH, budget, log_path)
            if problem:
                run.missing_reason[TORCH] = problem
        run.packages = inspect_packages(run.python, max(5.0, end - time.monotonic()))
    still = dict((name, run.missing_reason.get(name) or "not importable after pip") for name in list(PACKAGES) + [TORCH]
                 if not run.packages.get(name))
    figures.update(packages=dict(run.packages), missing=still)
    message = "%s: %s" % (run.python, ", ".join("%s %s" % (n, v) for n, v in sorted(run.packages.items()) if v) or "none of the packages")
    if still:
        message += "; missing %s (the steps needing them are skipped)" % ", ".join(sorted(still))
    return {"status": PASSED, "message": message, "figures": figures, "log": "steps/env.log"}


def packages(run: Run) -> dict[str, Optional[str]]:
    """What the steps' interpreter imports (asked once when the env step did not run)."""
    if run.packages is None:
        run.packages = inspect_packages(run.python)
    return run.packages


# ---------------------------------------------------------------------------------------------------------------
# record: the machine's real outputs

COMMANDS = (  # file, tool, arguments (the long forms, as doctor's probes run them: --status is -s, --errorcounters -e)
    ("nvidia-smi-topo-m.txt", "nvidia-smi", ("topo", "-m")),
    ("nvidia-smi-nvlink-status.txt", "nvidia-smi", ("nvlink", "--status")),
    ("nvidia-smi-nvlink-errorcounters.txt", "nvidia-smi", ("nvlink", "--errorcounters")),
    ("dcgmi-diag-r%d.json" % DCGM_LEVEL, "dcgmi", ("diag", "-r", str(DCGM_LEVEL), "-j")),
)
TOOL_TIMEOUTS = {"nvidia-smi": SMI_TIMEOUT_S, "dcgmi": float(dcgm_probe.DIAG_TIMEOUTS[DCGM_LEVEL])}

# Per PCI function: identity, driver, NUMA locality, PCIe link and AER counters.
PCI_FILES = ("vendor", "device", "class", "subsystem_vendor", "subsystem_device", "revision", "numa_node", "local_cpulist",
             "current_link_speed", "current_link_width", "max_link_speed", "max_link_width",
             "aer_dev_correctable", "aer_dev_fatal", "aer_dev_nonfatal")
# Bridges between a function and its root port: their links set the function's usable rate.
BRIDGE_FILES = ("vendor", "device", "class", "current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
NET_FILES = ("speed", "operstate", "mtu")
IB_FILES = ("fw_ver", "node_type")
IB_PORT_FILES = ("state", "phys_state", "rate", "link_layer")
NODE_FILES = ("online", "possible", "has_cpu", "has_memory")
PER_NODE_FILES = ("cpulist", "distance")
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
SMALL_FILE = 65536

NVML_SOURCE = r"""
import json, sys
from ansible_collections.continuum.hydra.plugins.module_utils._host import telemetry
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvml

def work(pynvml):
    source = telemetry.NvmlSource(pynvml)
    source.open()
    try:
        rows = source.read()
    finally:
        source.close()
    return {"devices": nvml.devices(pynvml), "nvlinks": nvml.nvlinks(pynvml), "telemetry_row": rows}

try:
    available, value = nvml.session(work, float(sys.argv[1]))
    out = dict(value, available=True, error=None) if available else {"available": False, "error": value}
    out["status"] = "ok"
except ProbeAbsent as exc:
    out = {"status": "absent", "reason": str(exc)}
except ProbeError as exc:
    out = {"status": "error", "reason": str(exc)}
print(json.dumps(out, indent=1, sort_keys=True))
"""


def sysfs_snapshot(root: str) -> dict[str, Any]:
    """The /sys files of the NVIDIA GPUs and NVSwitches, the NICs (net and RDMA), the bridges above them and the NUMA
    nodes, keyed by their path on the host ("/sys/..."); links by their target. Names with ':' stay inside the JSON
    (a fixture tree cannot hold them: tests/fixtures/sysfs/README.md)."""
    files: dict[str, str] = {}
    links: dict[str, str] = {}
    root = os.path.realpath(root)  # the bridges are found through resolved paths: one spelling of the root for both

    def host_path(path: str) -> str:
        return "/" + os.path.relpath(path, root)

    def take(path: str) -> None:
        if os.path.isfile(path):
            try:
                with open(path, "rb") as handle:
                    data = handle.read(SMALL_FILE)
            except OSError:
                return  # a counter the kernel refuses to read (EINVAL on a link that is down): not there
            files[host_path(path)] = data.decode("utf-8", "replace").rstrip("\n")

    def link(path: str) -> Optional[str]:
        if not os.path.islink(path):
            return None
        links[host_path(path)] = os.readlink(path)
        return os.path.realpath(path)

    devices = os.path.join(root, "sys/bus/pci/devices")
    functions: list[str] = []
    if os.path.isdir(devices):
        found = pci.scan_nvidia_functions(devices)
        functions += [f["address"] for f in found["gpus"] + found["nvswitches"]]
    for kind, names in (("net", NET_FILES), ("infiniband", IB_FILES)):
        class_dir = os.path.join(root, "sys/class", kind)
        for name in sorted(os.listdir(class_dir)) if os.path.isdir(class_dir) else []:
            target = link(os.path.join(class_dir, name, "device"))
            if target is None:
                continue  # a virtual interface (lo, bridges, veth): no PCI function
            for file_name in names:
                take(os.path.join(class_dir, name, file_name))
            ports = os.path.join(class_dir, name, "ports")
            for port in sorted(os.listdir(ports)) if kind == "infiniband" and os.path.isdir(ports) else []:
                for file_name in IB_PORT_FILES:
                    take(os.path.join(ports, port, file_name))
            while target != "/" and not _BDF.match(os.path.basename(target)):
                target = os.path.dirname(target)  # virtio-net's device is a child of its PCI function
            if target != "/":
                functions.append(os.path.basename(target))
    for address in sorted(set(functions)):
        entry = os.path.join(devices, address)
        real = link(entry) or entry
        for file_name in PCI_FILES:
            take(os.path.join(entry, file_name))
        link(os.path.join(entry, "driver"))
        parent = os.path.dirname(real)
        while _BDF.match(os.path.basename(parent)):
            for file_name in BRIDGE_FILES:
                take(os.path.join(parent, file_name))
            parent = os.path.dirname(parent)
    nodes = os.path.join(root, "sys/devices/system/node")
    for file_name in NODE_FILES:
        take(os.path.join(nodes, file_name))
    for node in sorted(os.listdir(nodes)) if os.path.isdir(nodes) else []:
        if re.match(r"^node\d+$", node):
            for file_name in PER_NODE_FILES:
                take(os.path.join(nodes, node, file_name))
    return {"root": "/", "pci_functions": sorted(set(functions)), "files": files, "links": links}


def record_command(run: Run, name: str, tool: str, argv: Sequence[str], end: float) -> None:
    what = " ".join((tool,) + tuple(argv))
    binary = command.find_binary(tool)
    if binary is None:
        run.record_file(name, what, None, SKIPPED, "%s is not installed (not on PATH)" % tool)
        return
    timeout = min(run.args.command_timeout or TOOL_TIMEOUTS[tool], end - time.monotonic())
    if timeout < 1:
        run.record_file(name, what, None, FAILED, "not run: the record step's deadline")
        return
    start = time.monotonic()
    try:
        rc, out, err = command.run([binary] + list(argv), timeout)
    except (ProbeAbsent, ProbeError) as exc:
        run.record_file(name, what, None, FAILED, str(exc), seconds=time.monotonic() - start)
        return
    run.record_file(name, what, out, RECORDED, None if rc == 0 else "exited with rc %d" % rc, rc=rc,
                    seconds=time.monotonic() - start, stderr=err)


def record_kernel_log(run: Run, end: float) -> None:
    what = "the kernel log's NVRM / NVSwitch lines (journalctl -k, else dmesg)"
    name = "kernel-log-nvrm.txt"
    start = time.monotonic()
    timeout = max(1.0, min(run.args.command_timeout or 15.0, end - time.monotonic()))
    try:
        # A year: whatever the journal keeps (dmesg: the whole boot).
        text, _cutoff, facts = gpu_probes.read_kernel_log({"xid_window_hours": 24 * 365, "timeouts": {"kernel_log": timeout}})
    except ProbeAbsent as exc:
        run.record_file(name, what, None, SKIPPED, str(exc))
        return
    except ProbeError as exc:
        run.record_file(name, what, None, FAILED, str(exc), seconds=time.monotonic() - start)
        return
    lines = [line for line in text.splitlines() if "NVRM" in line or "nvidia-nvswitch" in line]
    run.record_file(name, "%s, from %s" % (what, facts["source"]), "".join(line + "\n" for line in lines), RECORDED,
                    None if lines else "no NVIDIA line in the kernel log", seconds=time.monotonic() - start)


def record_nvml(run: Run, end: float) -> None:
    name, what = "nvml.json", "NVML readings: _host/gpus/nvml.py devices() and nvlinks(), one telemetry NvmlSource row"
    timeout = min(run.args.command_timeout or SMI_TIMEOUT_S, end - time.monotonic())
    start = time.monotonic()
    try:
        rc, out, err = command.run([run.python, "-c", NVML_SOURCE, str(max(1.0, timeout - 5))], max(1.0, timeout),
                                   env={"PYTHONPATH": COLLECTIONS})
    except (ProbeAbsent, ProbeError) as exc:
        run.record_file(name, what, None, FAILED, str(exc), seconds=time.monotonic() - start)
        return
    try:
        answer = json.loads(out)
    except ValueError:
        run.record_file(name, what, None, FAILED, "rc %s: %s" % (rc, nvidia_smi.first_line(err, out)), rc=rc,
                        seconds=time.monotonic() - start, stderr=err)
        return
    if answer.get("status") == READ_ABSENT:
        run.record_file(name, what, None, SKIPPED, answer.get("reason"))
    elif answer.get("status") != READ_OK:
        run.record_file(name, what, out, FAILED, answer.get("reason"), rc=rc, seconds=time.monotonic() - start)
    else:
        run.record_file(name, what, out, RECORDED, None if answer.get("available") else "NVML did not initialise: %s" % answer.get("error"),
                        rc=rc, seconds=time.monotonic() - start, stderr=err)


def step_record(run: Run, timeout: float) -> dict[str, Any]:
    end = time.monotonic() + timeout
    what = "nvidia-smi -q -x"
    if run.smi_xml is None:
        run.record_file("nvidia-smi-q-x.xml", what, None, SKIPPED, run.gpu.get("reason") or "nvidia-smi not found")
    else:
        rc, out, err, seconds = run.smi_xml
        run.record_file("nvidia-smi-q-x.xml", what, out, RECORDED, None if rc == 0 else "exited with rc %d" % rc, rc=rc,
                        seconds=seconds, stderr=err)
    for name, tool, argv in COMMANDS:
        record_command(run, name, tool, argv, end)
    version = os.path.join(run.sys_root, "proc/driver/nvidia/version")
    try:
        with open(version) as handle:
            run.record_file("proc-driver-nvidia-version.txt", "/proc/driver/nvidia/version", handle.read(), RECORDED)
    except OSError as exc:
        run.record_file("proc-driver-nvidia-version.txt", "/proc/driver/nvidia/version", None, SKIPPED, exc.strerror or str(exc))
    if run.gpu.get("present"):
        record_nvml(run, end)
    else:
        run.record_file("nvml.json", "NVML readings", None, SKIPPED, "no NVIDIA GPU")
    record_kernel_log(run, end)
    start = time.monotonic()
    try:
        snapshot = command.call_with_timeout(lambda: sysfs_snapshot(run.sys_root), max(1.0, end - time.monotonic()), "sysfs")
        run.record_file("sysfs.json", "/sys PCIe and NUMA files of the GPUs, NVSwitches and NICs (and the bridges above them)",
                        json.dumps(snapshot, indent=1, sort_keys=True) + "\n", RECORDED, seconds=time.monotonic() - start)
    except (ProbeError, OSError) as exc:
        run.record_file("sysfs.json", "/sys PCIe and NUMA files", None, FAILED, str(exc), seconds=time.monotonic() - start)
    failed = [entry for entry in run.manifest if entry["status"] == FAILED]
    essential = run.gpu.get("present") and (run.smi_xml is None or run.smi_xml[0] != 0)
    files = [entry["file"] for entry in run.manifest if "bytes" in entry]
    figures = {"files": dict((e["file"], e["status"] if not e.get("reason") else "%s: %s" % (e["status"], e["reason"]))
                             for e in run.manifest)}
    if failed or essential:
        problems = ["%s: %s" % (e["file"], e["reason"]) for e in failed]
        if essential:
            problems.insert(0, "nvidia-smi -q -x gave no recording on a GPU machine: %s" % run.gpu.get("reason"))
        return {"status": FAILED, "reason": "; ".join(problems), "figures": figures, "files": files}
    return {"status": PASSED, "message": "%d files in %s" % (len(files), run.recording_dir), "figures": figures, "files": files}


# ---------------------------------------------------------------------------------------------------------------
# gpu_tests: every gpu-marked test


def gpu_test_files() -> list[str]:
    found = []
    for directory, dirs, names in os.walk(os.path.join(REPO, "tests")):
        dirs[:] = sorted(d for d in dirs if d not in ("output", "fixtures", "__pycache__"))
        for name in sorted(names):
            if name.startswith("test_") and name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path) as handle:
                    if re.search(r"pytest\.mark\.gpu\b", handle.read()):
                        found.append(os.path.relpath(path, REPO))
    return found


def junit_counts(path: str) -> dict[str, Any]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    counts: dict[str, Any] = dict((key, sum(int(s.get(key, 0)) for s in suites)) for key in ("tests", "failures", "errors", "skipped"))
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    counts["not_passed"] = ["%s::%s: %s" % (case.get("classname"), case.get("name"), (child.get("message") or child.tag)[:200])
                            for suite in suites for case in suite.findall("testcase")
                            for child in case if child.tag in ("failure", "error", "skipped")]
    return counts


def step_gpu_tests(run: Run, timeout: float) -> dict[str, Any]:
    files = gpu_test_files()
    if not files:
        return {"status": FAILED, "reason": "no test file under tests/ is marked gpu"}
    junit = os.path.join(run.steps_dir, "gpu-tests.junit.xml")
    log_path = os.path.join(run.steps_dir, "gpu_tests.log")
    argv = [run.python, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-q", "-rA", "--junitxml", junit] + files
    rc, timed_out = run_logged(argv, timeout, log_path)
    result: dict[str, Any] = {"log": "steps/gpu_tests.log", "files": ["steps/gpu-tests.junit.xml"]}
    if timed_out:
        return dict(result, status=FAILED, reason="pytest -m gpu did not finish within %ds" % timeout)
    try:
        counts = junit_counts(junit)
    except (OSError, ET.ParseError) as exc:
        return dict(result, status=FAILED, reason="pytest exited with rc %s and no JUnit report (%s): %s" % (rc, exc, tail(log_path)))
    counts["test_files"] = files
    if rc != 0 or counts["failures"] or counts["errors"]:
        return dict(result, status=FAILED, figures=counts, reason="pytest -m gpu exited with rc %s: %d passed, %d failed, %d errors"
                    % (rc, counts["passed"], counts["failures"], counts["errors"]))
    if not counts["passed"]:
        return dict(result, status=FAILED, figures=counts, reason="every gpu test was skipped: %s" % "; ".join(counts["not_passed"][:3]))
    return dict(result, status=PASSED, figures=counts, message="%d passed, %d skipped" % (counts["passed"], counts["skipped"]))


# ---------------------------------------------------------------------------------------------------------------
# P7: bf16 matmul / the SKU's peak, pinned H2D / the PCIe link's rate, the all-reduce workload

# The active worker's work for P7: profile's matrix (n=8192), a copy long enough for the link to be sampled many times.
P7_ARGS = {"mode": "active", "matrix_n": 8192, "check_n": 1024, "seed": 20261124, "warmup_s": 1.0, "duration_s": 3.0,
           "device_copy_mib": 1024, "transfer_mib": 256, "repeats": 5, "allreduce_mib": 256}
TORCH_START_S = 30.0  # torch import and CUDA context creation before the worker's own deadline counts


def link_seen(rows: Sequence[Mapping[str, Any]], bus_id: Optional[str]) -> dict[str, Any]:
    """The highest PCIe generation and width the GPU reported (NVML / nvidia-smi) in the rows, and its maximum."""
    key = pci.pci_key(bus_id)
    mine = [row for row in rows if key and pci.pci_key(row.get("pci_bus_id")) == key]

    def top(name: str) -> Optional[int]:
        values = [row[name] for row in mine if isinstance(row.get(name), (int, float))]
        return int(max(values)) if values else None
    return {"gen": top("pcie_gen"), "width": top("pcie_width"), "gen_max": top("pcie_gen_max"), "width_max": top("pcie_width_max"),
            "samples": len(mine)}


def p7_gpu_figures(gpu: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One GPU of the worker's answer -> its P7 figures: measured / reference, with where each reference comes from."""
    sku = skus.find_sku(gpu.get("name")) or {}
    bf16 = figure(gpu.get("bf16_tflops"))
    pcie: Mapping[str, Any] = gpu["pcie"] if isinstance(gpu.get("pcie"), Mapping) else {}
    h2d = figure(pcie.get("h2d_gbps"))
    link = link_seen(rows, gpu.get("pci_bus_id"))
    link["source"] = "NVML / nvidia-smi while the copies ran"
    if link["gen"] is None or link["width"] is None:
        under_load = pcie.get("link_under_load") or {}
        link.update(gen=under_load.get("gen_max"), width=under_load.get("width_max"),
                    source="sysfs max_link_speed / max_link_width (the GPU was not read during the copies)")
    rate = skus.link_rate_gbps(link["gen"], link["width"])
    return {
        "index": gpu.get("index"), "name": gpu.get("name"), "pci_bus_id": gpu.get("pci_bus_id"), "sku": sku.get("id"),
        "bf16_tflops": None if bf16 is None else round(bf16, 2), "bf16_peak_tflops": sku.get("bf16_tflops_peak"),
        "bf16_ratio_of_peak": ratio(bf16, sku.get("bf16_tflops_peak")),
        "bf16_ratio_of_measured_reference": ratio(bf16, sku.get("bf16_tflops_measured")),
        "h2d_gbps": None if h2d is None else round(h2d, 2), "d2h_gbps": figure(pcie.get("d2h_gbps")),
        "link": link, "link_rate_gbps": None if rate is None else round(rate, 2), "h2d_ratio_of_link": ratio(h2d, rate),
        "sysfs_link_under_load": pcie.get("link_under_load"),
        "errors": dict([("gpu", gpu["error"])] if isinstance(gpu.get("error"), str) else []
                       + [(key, value["error"]) for key, value in gpu.items() if isinstance(value, Mapping) and "error" in value]),
    }


def step_p7_gpu(run: Run, timeout: float) -> dict[str, Any]:
    args = dict(P7_ARGS, deadline_s=max(5.0, timeout - TORCH_START_S))
    sampler = telemetry.Sampler(SAMPLE_INTERVAL_S)
    source, notes = telemetry.pick_gpu_source(sampler.add_gpu_row, SAMPLE_INTERVAL_S)
    sampler.gpu_source = source
    sampler.start()
    try:
        answer = _worker.run_worker(torch_worker, args, timeout, "P7 torch worker", python=run.python)
    except _worker.WorkerError as exc:
        return {"status": FAILED, "reason": str(exc)}
    finally:
        sampler.stop()
    run.record_file("torch-worker-active.json", "_host/measure/torch_worker.py mode active, P7's arguments: %s" % json.dumps(args),
                    json.dumps(answer, indent=1, sort_keys=True) + "\n", RECORDED)
    if answer.get("status") != READ_OK:
        return {"status": SKIPPED if answer.get("status") == READ_ABSENT else FAILED, "reason": answer.get("reason") or repr(answer)[:300]}
    if not answer.get("gpus"):
        return {"status": FAILED, "reason": "torch %s sees no CUDA device" % answer.get("torch_version")}
    rows = [row for _stamp, row in sampler.gpu_samples]
    gpus = [p7_gpu_figures(gpu, rows) for gpu in answer["gpus"]]
    figures = {"torch_version": answer.get("torch_version"), "cuda_version": answer.get("cuda_version"), "gpus": gpus,
               "not_run": answer.get("not_run"), "telemetry": sampler.describe(), "telemetry_notes": notes,
               "worker_allreduce": answer.get("allreduce"), "peak_source": "_host/gpus/skus.py bf16_tflops_peak (dense)",
               "link_rate_source": skus.PCIE_SOURCE}
    unmeasured = ["GPU %s: %s" % (g["index"], ", ".join(k for k in ("bf16_tflops", "h2d_gbps", "link_rate_gbps") if g[k] is None)
                                  + ("; " + "; ".join("%s %s" % item for item in g["errors"].items()) if g["errors"] else ""))
                  for g in gpus if g["bf16_tflops"] is None or g["h2d_gbps"] is None or g["link_rate_gbps"] is None]
    if answer.get("not_run"):
        unmeasured.append("not run before the worker's deadline: %s" % ", ".join(answer["not_run"]))
    if unmeasured:
        return {"status": FAILED, "figures": figures, "reason": "not measured: " + "; ".join(unmeasured)}
    return {"status": PASSED, "figures": figures, "message": "; ".join(
        "GPU %s %s: bf16 %.0f TFLOP/s = %s of peak, H2D %.1f GB/s = %s of Gen%s x%s" % (
            g["index"], g["sku"] or g["name"], g["bf16_tflops"], g["bf16_ratio_of_peak"], g["h2d_gbps"], g["h2d_ratio_of_link"],
            g["link"]["gen"], g["link"]["width"]) for g in gpus)}


def allreduce_entry(catalogue: str = os.path.join(REPO, "workloads", "models.json")) -> dict[str, Any]:
    with open(catalogue) as handle:
        return next(model for model in json.load(handle) if model["name"] == ALLREDUCE_WORKLOAD)


def allreduce_reference(names: Sequence[Optional[str]], link_rates: Sequence[Optional[float]]) -> tuple[Optional[float], str]:
    """What the bus bandwidth is compared with: the SKU table's NVLink ring figure when every GPU is one SKU that has one,
    else the slowest P7 PCIe link (a ring over PCIe cannot beat it)."""
    found = [skus.find_sku(name) for name in names]
    figures = set((sku or {}).get("allreduce_busbw_gbps") for sku in found)
    figure_found = figures.pop() if len(figures) == 1 else None
    if figure_found is not None and all(found):
        return float(figure_found), "%s NVLink ring, 8 GPUs (_host/gpus/skus.py)" % (found[0] or {}).get("label")
    rates = [rate for rate in link_rates if rate]
    if rates and len(rates) == len(names):
        return min(rates), "the slowest GPU's PCIe link rate (%s)" % skus.ALLREDUCE_PCIE_SOURCE
    return None, "no SKU figure and no measured PCIe link"


def step_p7_allreduce(run: Run, timeout: float) -> dict[str, Any]:
    count = run.gpu.get("count") or 0
    if count < 2:
        return {"status": SKIPPED, "reason": "%d GPU: the all-reduce needs two or more" % count}
    entry = allreduce_entry()
    seconds = max(2.0, min(10.0, timeout / 4))
    argv = [run.python, os.path.join(REPO, "workloads", entry["scripts"])] + entry["args"].split() + ["--seconds", "%g" % seconds]
    log_path = os.path.join(run.recording_dir, "allreduce-workload.txt")
    start = time.monotonic()
    rc, timed_out = run_logged(argv, timeout, log_path)
    with open(log_path) as handle:
        text = handle.read()
    run.record_file("allreduce-workload.txt", "workloads/%s %s (%s)" % (entry["scripts"], entry["args"], ALLREDUCE_WORKLOAD), text,
                    RECORDED, None if rc == 0 else "rc %s%s" % (rc, ", timed out" if timed_out else ""),
                    rc=rc, seconds=time.monotonic() - start)
    if timed_out or rc != 0:
        how = "timed out after %ds" % timeout if timed_out else "rc %s" % rc
        return {"status": FAILED, "reason": "%s %s: %s" % (ALLREDUCE_WORKLOAD, how, tail(log_path, 2))}
    found = parse_performance(text)
    busbw = figure(float(found[0])) if found else None
    if busbw is None:
        return {"status": FAILED, "reason": "no 'performance: <GB/s> busbw_GB_per_second' line: %s" % tail(log_path, 2)}
    p7 = (run.results.get("p7_gpu") or {}).get("figures") or {}
    rates = [g.get("link_rate_gbps") for g in p7.get("gpus") or []]
    reference, source = allreduce_reference(run.gpu.get("names") or [], rates if len(rates) == count else [])
    figures = {"gpus": count, "busbw_gbps": busbw, "metric": found[1] if found else None, "reference_gbps": reference,
               "reference_source": source, "ratio": ratio(busbw, reference), "seconds": seconds}
    return {"status": PASSED, "figures": figures, "files": ["allreduce-workload.txt"],
            "message": "%d GPUs: busbw %.1f GB/s = %s of %s GB/s" % (count, busbw, figures["ratio"], reference)}


# ---------------------------------------------------------------------------------------------------------------
# The playbooks on localhost


def run_playbook(run: Run, name: str, playbook: str, extra_vars: Mapping[str, Any], timeout: float) -> tuple[dict[str, Any], Optional[dict[str, Any]]]:
    """ansible-playbook on the embedded localhost inventory, its fleet report in steps/<name>/; (result, host entry)."""
    report_dir = os.path.join(run.steps_dir, name)
    os.makedirs(report_dir, exist_ok=True)
    log_path = os.path.join(run.steps_dir, name + ".log")
    env = child_env(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
                    HYDRA_REPORT_DIR=report_dir, HYDRA_HISTORY_DIR=os.path.join(report_dir, "history"))
    argv = [run.python, "-m", "ansible", "playbook", "-i", os.path.join(REPO, "inventories", "local.yml"),
            os.path.join(REPO, "playbooks", playbook), "-e", json.dumps(extra_vars)]
    rc, timed_out = run_logged(argv, timeout, log_path, env=env)
    result: dict[str, Any] = {"log": "steps/%s.log" % name, "files": ["steps/%s/fleet-report.json" % name]}
    if timed_out:
        return dict(result, status=FAILED, reason="%s did not finish within %ds" % (playbook, timeout)), None
    try:
        with open(os.path.join(report_dir, "fleet-report.json")) as handle:
            report = json.load(handle)
    except (OSError, ValueError) as exc:
        return dict(result, status=FAILED, reason="%s exited with rc %s and wrote no fleet report (%s): %s" % (
            playbook, rc, exc, tail(log_path))), None
    host = (report.get("hosts") or {}).get("localhost")
    if rc != 0 or not isinstance(host, dict):
        return dict(result, status=FAILED, reason="%s exited with rc %s: %s" % (playbook, rc, tail(log_path))), host
    return dict(result, status=PASSED), host


def doctor_step(run: Run, level: str, timeout: float, extra: Mapping[str, Any]) -> dict[str, Any]:
    # The module's own deadline ends before the step's, so a late probe is reported, not killed with the playbook.
    total = max(10, int(timeout - 15))
    extra_vars = dict(extra, hydra_level=level, hydra_timeouts=dict(extra.get("hydra_timeouts") or {}, total=total))
    result, host = run_playbook(run, "doctor_" + level, "doctor.yml", extra_vars, timeout)
    if result["status"] != PASSED or host is None:
        return result
    doctor = host.get("doctor") or {}
    checks = doctor.get("checks") or []
    if not checks:
        return dict(result, status=FAILED, reason="the fleet report holds no doctor result for localhost: %s" % host.get("message"))
    result["figures"] = {"level": doctor.get("level"), "summary": doctor.get("summary"), "verdict": host.get("status"),
                         "timeouts": extra_vars["hydra_timeouts"],
                         "not_passed": [{"id": c["id"], "status": c["status"], "message": (c.get("message") or "")[:240]}
                                        for c in checks if c["status"] != PASS]}
    errors = [c for c in checks if c["status"] == ERROR]
    if errors:
        return dict(result, status=FAILED, reason="%d check(s) ERROR (hydra could not read this machine): %s" % (
            len(errors), "; ".join("%s: %s" % (c["id"], (c.get("message") or "")[:160]) for c in errors[:5])))
    counts = ", ".join("%s %s" % (k, v) for k, v in sorted((doctor.get("summary") or {}).items()) if v)
    return dict(result, message="host verdict %s; checks: %s" % (host.get("status"), counts))


def step_doctor_standard(run: Run, timeout: float) -> dict[str, Any]:
    return doctor_step(run, "standard", timeout, {})


def step_doctor_deep(run: Run, timeout: float) -> dict[str, Any]:
    # Deep runs dcgmi diag, the GPU and memory active workers one after the other: a third of the time each, the rest
    # for the passive probes. dcgmi at -r 1 (seconds); -r 2 and above take minutes.
    share = max(15, int((timeout - 30) / 3))
    extra = {"hydra_expect": {"dcgm_diag_level": DCGM_LEVEL}, "hydra_timeouts": {"dcgm_diag": share, "active": share}}
    return doctor_step(run, "deep", timeout, extra)


def step_profile(run: Run, timeout: float) -> dict[str, Any]:
    count = max(1, run.gpu.get("count") or 1)
    per_gpu = max(20, int((timeout - 30) / count))
    extra = {"hydra_profile_benchmarks": ["gpu"], "hydra_profile_warmup_s": 1, "hydra_profile_duration_s": 3,
             "hydra_profile_benchmark_options": {"gpu": {"timeout_s": per_gpu}}}
    result, host = run_playbook(run, "profile", "profile.yml", extra, timeout)
    if result["status"] != PASSED:
        return result
    profile = (host or {}).get("profile") or {}
    numbers = profile.get("figures") or {}
    gpu_status = (profile.get("benchmark_status") or {}).get("gpu_sustained")
    result["figures"] = {"gpu_sustained": gpu_status, "gpus": profile.get("gpus"), "verdict": profile.get("verdict"),
                         "figures": dict((key, value) for key, value in numbers.items() if key.startswith("gpu_"))}
    if gpu_status != READ_OK or not numbers.get("gpu_count") or numbers.get("gpu_measured") != numbers.get("gpu_count"):
        return dict(result, status=FAILED, reason="the GPU benchmark is %s: %s of %s GPUs measured" % (
            gpu_status, numbers.get("gpu_measured"), numbers.get("gpu_count")))
    return dict(result, message="bf16 %s TFLOP/s, H2D %s GB/s (fleet figures of %s GPU(s))" % (
        numbers.get("gpu_bf16_tflops"), numbers.get("gpu_h2d_gbps"), numbers.get("gpu_count")))


STEPS = (
    Step("env", 60.0, True, (), step_env, "virtualenv; ansible-core, pytest, nvidia-ml-py, NumPy, torch when missing"),
    Step("record", 150.0, False, (), step_record, "the machine's real outputs into the recording folder"),
    Step("gpu_tests", 150.0, True, ("pytest",), step_gpu_tests, "every gpu-marked test (pytest -m gpu)"),
    Step("p7_gpu", 90.0, True, (TORCH,), step_p7_gpu, "P7: bf16 matmul / SKU peak, pinned H2D / PCIe link rate"),
    Step("p7_allreduce", 60.0, True, (TORCH,), step_p7_allreduce, "P7: the all-reduce workload on every GPU found"),
    Step("doctor_standard", 90.0, True, ("ansible-core",), step_doctor_standard, "playbooks/doctor.yml, level standard"),
    Step("doctor_deep", 200.0, True, ("ansible-core",), step_doctor_deep, "playbooks/doctor.yml, level deep (DCGM -r 1, active)"),
    Step("profile", 120.0, True, ("ansible-core", TORCH), step_profile, "playbooks/profile.yml, GPU benchmark"),
)
STEP_NAMES = tuple(step.name for step in STEPS)


# ---------------------------------------------------------------------------------------------------------------
# Running the steps, the summary, the recording's README, the archive


def skip_reason(run: Run, step: Step, selected: Sequence[str]) -> Optional[str]:
    if step.name not in selected:
        return "not selected (--steps)"
    if step.needs_gpu and not run.gpu.get("present"):
        return "no NVIDIA GPU (%s)" % (run.gpu.get("reason") or "none found")
    missing = [name for name in step.needs if not packages(run).get(name)]
    if missing:
        why = [run.missing_reason.get(name) or "%s is not importable by %s" % (name, run.python) for name in missing]
        return "needs %s: %s" % (", ".join(missing), "; ".join(why))
    return None


def run_step(run: Run, step: Step, selected: Sequence[str]) -> dict[str, Any]:
    cap = run.args.step_timeouts.get(step.name, step.cap_s)
    if step.name == "env" and not run.args.python:
        cap += max(0.0, run.args.torch_budget)
    entry: dict[str, Any] = {"name": step.name, "what": step.what, "status": SKIPPED, "seconds": 0.0}
    try:
        reason = skip_reason(run, step, selected)
    except ProbeError as exc:
        reason = str(exc)
    if reason is None:
        timeout = min(cap, run.left() - FINISH_RESERVE_S)
        if timeout < MIN_STEP_S:
            reason = "out of time: %.0fs of --budget %gs left" % (max(0.0, run.left()), run.args.budget)
    if reason is not None:
        entry["reason"] = reason
        return entry
    entry["timeout_s"] = round(timeout, 1)
    log("%s: %s (at most %ds)" % (step.name, step.what, timeout))
    start = time.monotonic()
    try:
        outcome = step.run(run, timeout)
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # A crash is this step's failure, not the run's: the rest still runs, the traceback is in its log.
        with open(os.path.join(run.steps_dir, step.name + ".crash.log"), "a") as handle:
            handle.write(traceback.format_exc())
        outcome = {"status": FAILED, "reason": "crashed: %s: %s" % (type(exc).__name__, exc), "log": "steps/%s.crash.log" % step.name}
    entry.update(outcome)
    entry["seconds"] = round(time.monotonic() - start, 1)
    detail = entry.get("reason") if entry["status"] != PASSED else entry.get("message")
    log("%s %s in %.1fs%s" % (step.name, entry["status"], entry["seconds"], ": %s" % detail if detail else ""))
    return entry


def galaxy_version() -> Optional[str]:
    try:
        with open(os.path.join(REPO, "galaxy.yml")) as handle:
            return next((line.split(":", 1)[1].strip() for line in handle if line.startswith("version:")), None)
    except OSError:
        return None


def os_name(root: str) -> Optional[str]:
    try:
        with open(os.path.join(root, "etc/os-release")) as handle:
            return next((line.split("=", 1)[1].strip().strip('"') for line in handle if line.startswith("PRETTY_NAME=")), None)
    except OSError:
        return None


def write_readme(run: Run) -> None:
    gpu = run.gpu
    torch_version = (run.packages or {}).get(TORCH)
    described = ("%d x %s (driver %s, CUDA %s)" % (gpu["count"], gpu["names"][0], gpu.get("driver_version"), gpu.get("cuda_version"))
                 if gpu.get("names") else "no NVIDIA GPU")
    lines = [
        "# %s: recorded by `make gpu-check`" % run.machine(), "",
        "Recorded %s on host `%s`: %s; kernel %s, %s, %d CPUs, Python %s%s." % (
            run.started_at, run.host, described, platform.release(), os_name(run.sys_root) or "unknown OS", os.cpu_count() or 0,
            platform.python_version(), ", torch %s" % torch_version if torch_version else ""),
        "Recorded by continuum.hydra %s (`benchmarks/gpu_check.py`, docs/gpu-check.md); real outputs of this machine, made for "
        "this project (GPL-3.0-or-later, as the collection). `manifest.json` holds the same table as data." % (galaxy_version() or "?"),
        "", "| file | what | status | exit status | seconds |", "| --- | --- | --- | --- | --- |",
    ]
    for entry in sorted(run.manifest, key=lambda item: item["file"]):
        status = entry["status"] + (": %s" % entry["reason"] if entry.get("reason") else "")
        lines.append("| `%s` | %s | %s | %s | %s |" % (
            entry["file"], entry["what"].replace("|", "/"), status.replace("|", "/").replace("\n", " "),
            "" if entry.get("rc") is None else entry["rc"], "" if entry.get("seconds") is None else entry["seconds"]))
    lines += ["", "Files without text (skipped or failed) are listed with the reason and not written. `sysfs.json` keys each file by "
              "its path on the host; its `links` hold the targets of the /sys symlinks read (class devices, drivers, the PCI path).",
              "To make this a fixture: copy the folder to `tests/fixtures/<name>/`, keep this README, add its line to "
              "tests/fixtures/README.md (docs/gpu-check.md).", ""]
    _atomic.write_atomic(os.path.join(run.recording_dir, "README.md"), "\n".join(lines))
    _atomic.write_atomic(os.path.join(run.recording_dir, "manifest.json"), json.dumps(run.manifest, indent=1, sort_keys=True) + "\n")


def pack(run: Run, summary_path: str) -> str:
    archive = os.path.join(run.out_dir, "gpu-check-%s.tar.gz" % run.machine())
    temp = archive + ".tmp"
    with tarfile.open(temp, "w:gz") as tar:
        tar.add(summary_path, arcname="summary.json")
        for folder in (run.recording_dir, run.steps_dir):
            tar.add(folder, arcname=os.path.basename(folder))
    os.replace(temp, archive)
    return archive


def summarize(run: Run, steps: list[dict[str, Any]]) -> dict[str, Any]:
    totals = dict((status, sum(1 for s in steps if s["status"] == status)) for status in (PASSED, FAILED, SKIPPED))
    return {
        "kind": "continuum.hydra.gpu_check", "schema_version": "1", "host": run.host, "machine": run.machine(),
        "started_at": run.started_at, "seconds": round(time.monotonic() - run.started, 1), "budget_s": run.args.budget,
        "gpu": dict((key, value) for key, value in run.gpu.items() if key != "nvidia_smi"), "python": run.python,
        "packages": run.packages, "out_dir": run.out_dir, "recording_dir": run.recording_dir,
        "recording": [dict((k, e.get(k)) for k in ("file", "status", "reason")) for e in sorted(run.manifest, key=lambda e: e["file"])],
        "steps": steps, "totals": totals, "ok": totals[FAILED] == 0,
    }


def main_run(args: argparse.Namespace) -> int:
    run = Run(args)
    detect_gpus(run)
    if not run.gpu["present"]:
        log("no NVIDIA GPU on this machine (%s): the GPU steps are skipped, the machine is recorded" % (run.gpu["reason"] or "none found"))
    elif run.gpu["reason"]:
        log("NVIDIA GPU functions on the PCI bus, but %s: the GPU steps run and will say what fails" % run.gpu["reason"])
    else:
        log("%d x %s, driver %s" % (run.gpu["count"], run.gpu["names"][0], run.gpu["driver_version"]))
    run.out_dir = os.path.abspath(args.out or os.path.join(REPO, "reports", "gpu-check", "%s-%s" % (
        run.machine(), run.started_at.replace(":", "").replace("+0000", "Z"))))
    run.recording_dir = os.path.join(run.out_dir, run.machine())
    run.steps_dir = os.path.join(run.out_dir, "steps")
    os.makedirs(run.recording_dir, exist_ok=True)
    os.makedirs(run.steps_dir, exist_ok=True)
    steps = []
    summary_path = os.path.join(run.out_dir, "summary.json")
    for step in STEPS:
        entry = run_step(run, step, args.steps)
        run.results[step.name] = entry
        steps.append(entry)
        # After every step: a run killed from outside still leaves what it measured so far.
        _atomic.write_atomic(summary_path, json.dumps(dict(summarize(run, steps), complete=False), indent=1) + "\n")
    write_readme(run)
    summary = dict(summarize(run, steps), complete=True)
    _atomic.write_atomic(summary_path, json.dumps(summary, indent=1) + "\n")
    summary["archive"] = pack(run, summary_path)
    _atomic.write_atomic(summary_path, json.dumps(summary, indent=1) + "\n")
    if args.pack:
        shutil.rmtree(run.recording_dir)
        shutil.rmtree(run.steps_dir)
    sys.stdout.write(json.dumps(summary, indent=1) + "\n")
    log("%s: %d passed, %d failed, %d skipped in %.0fs; recordings in %s, everything in %s" % (
        "ok" if summary["ok"] else "FAILED", summary["totals"][PASSED], summary["totals"][FAILED], summary["totals"][SKIPPED],
        summary["seconds"], run.recording_dir, summary["archive"]))
    return 0 if summary["ok"] else 1


# ---------------------------------------------------------------------------------------------------------------
# --download-wheels: what an offline GPU machine lacks, fetched here


def download_wheels(args: argparse.Namespace) -> int:
    """pip download of the check's packages (and their dependencies) as wheels for another machine's Python."""
    version = args.wheels_python
    if not re.match(r"^3\.\d+$", version):
        raise BadArguments("--wheels-python %r: give the GPU machine's Python as 3.N (3.9 and later)" % version)
    specs = requirement_specs()
    unknown = [name for name in args.wheels_packages if name not in specs]
    if unknown:
        raise BadArguments("--wheels-packages %s: accepted: %s" % (",".join(unknown), ", ".join(specs)))
    abi = "cp" + version.replace(".", "")
    platforms = ["manylinux_2_%d_x86_64" % minor for minor in (17, 24, 27, 28, 31, 34, 35)] + ["manylinux2014_x86_64"]
    argv = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--python-version", version, "--implementation", "cp",
            "--abi", abi, "--abi", "abi3", "--abi", "none", "-d", args.download_wheels, "--timeout", str(PIP_CONNECT_TIMEOUT_S)]
    for name in platforms:
        argv += ["--platform", name]
    argv += [specs[name] for name in args.wheels_packages]
    os.makedirs(args.download_wheels, exist_ok=True)
    log_path = os.path.join(args.download_wheels, "download.log")
    rc, timed_out = command.run_to_file(argv, 600, log_path, env=dict(os.environ))
    if rc != 0:
        log("pip download failed (%s): %s" % ("timed out" if timed_out else "rc %s" % rc, tail(log_path)))
        return 1
    log("wheels for Python %s in %s: carry that folder and run with --wheels %s" % (version, args.download_wheels, args.download_wheels))
    return 0


# ---------------------------------------------------------------------------------------------------------------
# Arguments


def step_timeouts(values: Sequence[str]) -> dict[str, float]:
    found = {}
    for value in values:
        name, _sep, seconds = value.partition("=")
        if name not in STEP_NAMES:
            raise BadArguments("--step-timeout %r: the step is one of %s" % (value, ", ".join(STEP_NAMES)))
        try:
            number = float(seconds)
        except ValueError:
            number = -1.0
        if not math.isfinite(number) or number <= 0:
            raise BadArguments("--step-timeout %r: give NAME=SECONDS with SECONDS a number above 0" % value)
        found[name] = number
    return found


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu_check.py", description=(__doc__ or "").splitlines()[0],
                                     epilog="Steps: %s. docs/gpu-check.md" % ", ".join("%s (%s)" % (s.name, s.what) for s in STEPS))
    parser.add_argument("--out", default=os.environ.get("GPU_CHECK_OUT") or None,
                        help="folder for summary.json, the recording, the step logs and the archive "
                             "(default reports/gpu-check/<machine>-<time>; env GPU_CHECK_OUT)")
    parser.add_argument("--pack", action="store_true", help="leave only summary.json and the .tar.gz in --out (for a tool that "
                                                            "brings back a few files)")
    parser.add_argument("--steps", default=",".join(STEP_NAMES), help="comma-separated steps to run (default: all)")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for the whole run (default %(default)s)")
    parser.add_argument("--step-timeout", action="append", default=[], metavar="NAME=SECONDS", help="a step's own deadline")
    parser.add_argument("--torch-budget", type=float, default=DEFAULT_TORCH_BUDGET_S,
                        help="seconds pip may take to install torch when it is missing; 0: never (default %(default)s)")
    parser.add_argument("--wheels", help="install missing packages from this folder of wheels only (no package index)")
    parser.add_argument("--python", help="use this interpreter as it is (no virtualenv, nothing installed)")
    parser.add_argument("--venv", default=VENV, help="the check's virtualenv (default %(default)s)")
    parser.add_argument("--command-timeout", type=float, default=None, help="one deadline for every recorded command")
    parser.add_argument("--sys-root", default="/", help="where /sys and /proc are read (a planted tree in tests)")
    parser.add_argument("--download-wheels", metavar="DIR", help="only download wheels for an offline GPU machine into DIR")
    parser.add_argument("--wheels-python", default="3.12", help="the GPU machine's Python for --download-wheels")
    parser.add_argument("--wheels-packages", default=",".join(PACKAGES), help="what --download-wheels fetches")
    args = parser.parse_args(argv)
    args.steps = [name.strip() for name in args.steps.split(",") if name.strip()]
    unknown = [name for name in args.steps if name not in STEP_NAMES]
    if unknown or not args.steps:
        raise BadArguments("--steps %r: accepted: %s" % (",".join(unknown) or "", ", ".join(STEP_NAMES)))
    for name, value in (("--budget", args.budget), ("--torch-budget", args.torch_budget), ("--command-timeout", args.command_timeout)):
        if value is not None and (not math.isfinite(value) or value < 0 or (value == 0 and name != "--torch-budget")):
            raise BadArguments("%s %r: give a number of seconds above 0%s" % (name, value, " (or 0)" if name == "--torch-budget" else ""))
    args.step_timeouts = step_timeouts(args.step_timeout)
    args.wheels_packages = [name.strip() for name in args.wheels_packages.split(",") if name.strip()]
    if args.wheels and not os.path.isdir(args.wheels):
        raise BadArguments("--wheels %r: not a folder" % args.wheels)
    if args.python and not os.access(args.python, os.X_OK):
        raise BadArguments("--python %r: not an executable file" % args.python)
    if not os.path.isdir(os.path.join(args.sys_root, "sys")) and not os.path.isdir(os.path.join(args.sys_root, "proc")):
        raise BadArguments("--sys-root %r: holds neither sys/ nor proc/" % args.sys_root)
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise BadArguments("--out %r: exists and is not a folder" % args.out)
    return args


def main(argv: Sequence[str]) -> int:
    try:
        args = parse_args(argv)
        if args.download_wheels:
            return download_wheels(args)
        return main_run(args)
    except BadArguments as exc:
        log("error: %s" % exc)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
