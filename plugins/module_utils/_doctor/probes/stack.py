# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The software stack: PyTorch as the training interpreter sees it, and the CUDA toolkit (nvcc).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, find_binary, run

# Runs in the torch interpreter (any Python 3.6+), never in the module's own process: importing
# torch costs seconds and hundreds of MB, can crash on a broken CUDA install, and the interpreter
# that matters is the training environment's, not the one Ansible picked.
TORCH_SCRIPT = r'''
import json, os, sys, warnings
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # whatever torch prints goes to stderr: stdout carries our one JSON line only
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]  # a ./torch directory in the working directory must not shadow the real one

def err(exc):
    return "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")

r = {"python": sys.executable, "python_version": "%d.%d.%d" % tuple(sys.version_info[:3]),
     "prefix": sys.prefix, "base_prefix": getattr(sys, "base_prefix", sys.prefix),
     "conda": bool(os.environ.get("CONDA_PREFIX")) or os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
     "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
     "installed": False, "import_error": None}
try:
    import importlib.util
    r["installed"] = importlib.util.find_spec("torch") is not None
except Exception as exc:
    r["import_error"] = err(exc)
if r["installed"]:
    try:
        import torch
        r["version"] = str(torch.__version__)
        r["cuda_build"] = getattr(torch.version, "cuda", None)
        r["hip_build"] = getattr(torch.version, "hip", None)
        try:
            r["cudnn_version"] = torch.backends.cudnn.version()
        except Exception:
            r["cudnn_version"] = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                r["cuda_available"] = bool(torch.cuda.is_available())
                r["device_count"] = int(torch.cuda.device_count()) if r["cuda_available"] else 0
            except Exception as exc:
                r["cuda_available"], r["device_count"], r["cuda_error"] = False, 0, err(exc)
        r["cuda_warnings"] = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()][:3]
        r["devices"] = []
        for i in range(r["device_count"]):
            try:
                p = torch.cuda.get_device_properties(i)
                uuid = getattr(p, "uuid", None)
                bus = getattr(p, "pci_bus_id", None)
                r["devices"].append({
                    "index": i, "name": p.name, "capability": "%d.%d" % (p.major, p.minor),
                    "total_memory_bytes": int(p.total_memory), "multi_processor_count": int(p.multi_processor_count),
                    "uuid": None if uuid is None else str(uuid),
                    "pci_bus_id": None if bus is None else "%08X:%02X:%02X.0" % (
                        getattr(p, "pci_domain_id", 0), bus, getattr(p, "pci_device_id", 0))})
            except Exception as exc:
                r["devices"].append({"index": i, "error": err(exc)})
        try:
            import torch.distributed as dist
            r["distributed_available"] = bool(dist.is_available())
            r["nccl_available"] = bool(dist.is_available() and dist.is_nccl_available())
        except Exception as exc:
            r["distributed_available"], r["nccl_available"], r["nccl_error"] = False, False, err(exc)
        try:
            r["nccl_version"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception as exc:
            r["nccl_version"] = None
            r.setdefault("nccl_error", err(exc))
    except Exception as exc:
        r["import_error"] = err(exc)
out.write(json.dumps(r) + "\n")
out.flush()
'''

NVCC_FALLBACKS = ("/usr/local/cuda/bin/nvcc",)


def parse_torch_output(stdout: str, python: str) -> dict[str, Any]:
    """The torch script's one JSON object; ProbeError naming the first line that is not it."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise ProbeError("torch probe: %s printed nothing" % python)
    for number, line in enumerate(lines, 1):
        try:
            data = json.loads(line)
        except ValueError:
            data = None
        if not isinstance(data, dict) or "installed" not in data:
            raise ProbeError("torch probe: %s printed unexpected output on line %d: %r" % (python, number, line[:200]))
    if len(lines) > 1:
        raise ProbeError("torch probe: %s printed %d JSON lines, expected 1" % (python, len(lines)))
    return json.loads(lines[0])


def interpreter_without_torch() -> Optional[dict[str, Any]]:
    """TORCH_SCRIPT's answer for this interpreter when it has no torch package, without starting it again
    (~30 ms on every host without torch); None when a torch package is there (the script must import it).
    The same keys as the script's (a test compares them)."""
    try:
        if importlib.util.find_spec("torch") is not None:
            return None
    except (ImportError, ValueError):
        return None
    return {"python": sys.executable, "python_version": "%d.%d.%d" % tuple(sys.version_info[:3]),
            "prefix": sys.prefix, "base_prefix": getattr(sys, "base_prefix", sys.prefix),
            "conda": bool(os.environ.get("CONDA_PREFIX")) or os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "installed": False, "import_error": None}


def probe_torch(options: Mapping[str, Any]) -> dict[str, Any]:
    """PyTorch in ``options["torch_python"]`` (default: this interpreter), from one subprocess.

    Torch not installed is data (``installed: False``), not absence: whether that matters is the
    pytorch.installed check's call, and the environment.venv check still needs the interpreter facts.
    A hang is a ProbeError after ``timeouts.torch`` seconds; garbage output names its first bad line.
    """
    python = options.get("torch_python") or sys.executable
    if options.get("torch_python") and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise ProbeError("torch_python %s is not an executable file; give the path of a Python interpreter" % python)
    facts = interpreter_without_torch() if python == sys.executable else None
    if facts is not None:
        return facts
    rc, stdout, stderr = run([python, "-c", TORCH_SCRIPT], options["timeouts"]["torch"])
    if not stdout.strip() and rc != 0:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeError("torch probe: %s exited with rc %d: %s" % (python, rc, tail[:200]))
    return parse_torch_output(stdout, python)


def parse_nvcc_version(text: str) -> dict[str, Any]:
    """``nvcc --version`` -> release ("13.0"), full version ("13.0.88") and build string."""
    match = re.search(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)", text)
    if not match:
        first = (text.strip().splitlines() or [""])[0]
        raise ProbeError("nvcc --version: no 'release X.Y, VX.Y.Z' line in its output (first line: %r)" % first[:200])
    build = re.search(r"^Build (\S+)", text, re.MULTILINE)
    return {"release": match.group(1), "version": match.group(2), "build": build.group(1) if build else None}


def probe_nvcc(options: Mapping[str, Any], fallbacks: Sequence[str] = NVCC_FALLBACKS) -> dict[str, Any]:
    """The CUDA toolkit's compiler: on PATH, else the toolkit's usual install directory."""
    path = find_binary("nvcc") or next((p for p in fallbacks if os.access(p, os.X_OK)), None)
    if path is None:
        raise ProbeAbsent("no CUDA toolkit: nvcc is not on PATH nor in %s (not needed for PyTorch wheels)"
                          % ", ".join(os.path.dirname(p) for p in fallbacks))
    rc, stdout, stderr = run([path, "--version"], options["timeouts"]["command"])
    if rc != 0:
        tail = (stderr.strip().splitlines() or stdout.strip().splitlines() or ["no output"])[-1]
        raise ProbeError("%s --version exited with rc %d: %s" % (path, rc, tail[:200]))
    data = parse_nvcc_version(stdout)
    data["path"] = path
    return data
