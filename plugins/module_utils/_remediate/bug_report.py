# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Evidence before a drain: the GPU vendor's own report of a node, taken on the node, bounded in time and size.

The slurm_gate role (slurm_gate_collect_evidence) runs this on each node it is about to drain, before the drain and
before anyone resets or reboots it, so the vendor's support gets the state the fault left:

- NVIDIA: ``nvidia-bug-report.sh --output-file <base>.log``, which writes ``<base>.log.gz`` (the script adds the .gz);
- AMD: ``amd-smi static``, ``metric``, ``bad-pages`` and ``firmware`` as JSON (amd-smi has no single dump), gathered
  into one gzip file, each command under the same deadline.

The whole collection has one deadline (its commands are killed as a group past it, _host/command.py), and a report
larger than ``max_bytes`` is removed rather than fetched. The continuum.hydra.bug_report action fetches the file
into the fleet report's evidence directory.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import gzip
import os
import time
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command, gpus

NVIDIA_TOOL = "nvidia-bug-report.sh"
AMD_SUBCOMMANDS = ("static", "metric", "bad-pages", "firmware")
DEFAULT_TIMEOUT_S = 300  # nvidia-bug-report.sh takes one to a few minutes on an 8-GPU host
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_OUTPUT_DIR = "/var/lib/continuum-hydra/evidence"
# Fetching the report to the controller after it is taken: a few hundred MiB over a loaded link.
FETCH_S = 120.0


class EvidenceError(Exception):
    """No report could be taken, or it broke a bound: one line saying which."""


def validate(params: Mapping[str, Any]) -> None:
    if not os.path.isabs(params.get("output_dir") or ""):
        raise EvidenceError("output_dir: %r is not an absolute path" % (params.get("output_dir"),))
    for key in ("timeout", "max_bytes"):
        value = params.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise EvidenceError("%s: %r is not a whole number above 0" % (key, value))


def deadline_s(timeout: float) -> float:
    """The most one bug_report task takes: the collection's deadline, then the fetch."""
    return float(timeout) + FETCH_S


def _stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _bounded(path: str, max_bytes: int) -> int:
    """The file's size; EvidenceError (the file removed) past max_bytes."""
    size = os.path.getsize(path)
    if size > max_bytes:
        os.unlink(path)
        raise EvidenceError("%s was %d bytes, more than max_bytes %d: removed, not fetched" % (path, size, max_bytes))
    return size


def nvidia(tool: str, output_dir: str, timeout: float, max_bytes: int) -> dict[str, Any]:
    base = os.path.join(output_dir, "nvidia-bug-report-%s.log" % _stamp())
    rc, out, err = command.run([tool, "--output-file", base], timeout)
    path = base + ".gz"
    if not os.path.isfile(path):
        raise EvidenceError("%s --output-file %s: rc %d, no %s: %s" % (tool, base, rc, path, " ".join((err or out).split())[-300:]))
    return {"tool": tool, "path": path, "bytes": _bounded(path, max_bytes), "rc": rc}


def amd(tool: str, output_dir: str, timeout: float, max_bytes: int) -> dict[str, Any]:
    path = os.path.join(output_dir, "amd-smi-report-%s.log.gz" % _stamp())
    end = time.monotonic() + timeout
    problems = []
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for sub in AMD_SUBCOMMANDS:
            left = end - time.monotonic()
            if left <= 0:
                problems.append("%s: not run, the %d s deadline passed" % (sub, timeout))
                continue
            try:
                rc, out, err = command.run([tool, sub, "--json"], left)
            except command.ProbeError as exc:
                problems.append("%s: %s" % (sub, exc))
                continue
            handle.write("===== %s %s --json (rc %d)\n%s\n%s\n" % (tool, sub, rc, out, err))
            if rc != 0:
                problems.append("%s: rc %d" % (sub, rc))
    return {"tool": tool, "path": path, "bytes": _bounded(path, max_bytes), "rc": 0, "problems": problems}


def collect(params: Mapping[str, Any]) -> dict[str, Any]:
    """Take the node's vendor report into output_dir: {tool, path, bytes, rc, seconds}; EvidenceError naming why not."""
    validate(params)
    start = time.monotonic()
    os.makedirs(params["output_dir"], mode=0o700, exist_ok=True)
    tool = command.find_binary(NVIDIA_TOOL, params.get("nvidia_bug_report_path"))
    try:
        if tool:
            found = nvidia(tool, params["output_dir"], params["timeout"], params["max_bytes"])
        else:
            amd_tool: Optional[str] = gpus.find_rocm_tool("amd-smi", override=params.get("amd_smi_path"))
            if not amd_tool:
                raise EvidenceError("neither %s nor amd-smi found: no vendor report to take" % NVIDIA_TOOL)
            found = amd(amd_tool, params["output_dir"], params["timeout"], params["max_bytes"])
    except command.ProbeError as exc:  # the deadline: the tool and what it started were killed
        raise EvidenceError(str(exc)) from None
    return dict(found, seconds=round(time.monotonic() - start, 1))
