# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""AMD's ROCm Validation Suite: ``rvs -r <level>`` (or ``rvs -c <conf>``), run once (doctor level ``deep``), read
from its result lines.

RVS exits 0 even when an action fails (its exit status only reports command-line, configuration and launch
errors), so the verdicts come from the text alone (ROCm/ROCmValidationSuite docs/ug1main.md, rvs/src; recordings in
tests/fixtures/rvs/). Lines are ``[RESULT] [<uptime>] [<action>] ...`` (also ``[INFO  ]``, ``[ERROR ]``):

- gst: ``[<action>] [GPU:: <gpu_id>] GFLOPS <n> Target GFLOPS: <t> met: TRUE|FALSE``
- iet, pulse: ``[<action>] [GPU:: <gpu_id>] pass: TRUE|FALSE``; smqt: ``[<action>] smqt <gpu_id> pass: true|false``
- peqt: ``[<action>] peqt true|false``; mem: ``[<action>] mem Test <n> : PASS|FAIL`` (neither names a GPU)
- gm: ``[<action>] gm <gpu_id> <metric> violations <n>`` (a violation is a failure)
- pbqt/pqt peer checks: ``[<action>] p2p [GPU:: <node> - <gpu_id> - <BDF>] [GPU:: ...] peers:true|false distance:..``
  (2018: ``[<action>] p2p <gpu_id> <gpu_id> true|false``): two distinct GPUs that are not peers cannot be tested
  (RVS then logs ``[ERROR ] ... p2p-bandwidth No peers found``); a GPU paired with itself is no result
- since 2025 an "RVS Summary" box: versions, each GPU as ``<name> - <gpu_id>`` over ``<index> - <node> - <BDF>``,
  and one ``| <action> | <MODULE> | PASS|FAIL |`` row per action (coloured with ANSI codes).

GPUs are KFD gpu_ids; the summary box and the ``[GPU:: <node> - <gpu_id> - <BDF>]`` lines of pebb/pbqt name their
PCI address. Error lines (``[ERROR ]``, ``RVS-ERROR [<MODULE>] [<action>] internal error`` on stderr) are kept for
the message. The verdicts are read before the exit status: rvs exiting non-zero after printing verdicts is judged
on them (exit_code says how it ended); only a non-zero exit with no verdict is a ProbeError. A line that cannot be
read is skipped and counted in ``bad_lines`` (_host/lines.py). A probe reads, never judges: checks/rvs.py gives the
verdict.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import os
import re
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command, gpus
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import LINE_ERRORS, BadLines, parse_lines

Options = Mapping[str, Any]

RVS_LEVELS = (1, 2, 3, 4, 5)
DEFAULT_RVS_LEVEL = 2
DEFAULT_TIMEOUT = 1800
# Where older ROCm releases install rvs, beside the places of every ROCm tool (gpus.find_rocm_tool).
RVS_PATHS = ("/opt/rocm/rvs/rvs",)
NO_PLATFORM = "No platform support for the detected GPU"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(r"^\s*\[(?P<kind>RESULT|INFO|ERROR|DEBUG|TRACE|WARN(?:ING)?)\s*\]\s*\[\s*[\d.]+\s*\]\s?(?P<body>.*)$")
_ACTION_NAME = re.compile(r"^Action name\s*:\s*(?P<action>\S+)")
_MODULE_NAME = re.compile(r"^Module name\s*:\s*(?P<module>\S+)")
_GST = re.compile(r"^\[(?P<action>[^\]]+)\]\s*\[GPU::\s*(?P<gpu>\d+)\]\s*GFLOPS\s+(?P<value>[\d.]+)\s+"
                  r"Target GFLOPS:\s*(?P<target>[\d.]+)\s+met:\s*(?P<verdict>TRUE|FALSE)", re.I)
_GPU_PASS = re.compile(r"^\[(?P<action>[^\]]+)\]\s*\[GPU::\s*(?P<gpu>\d+)\]\s*pass:\s*(?P<verdict>TRUE|FALSE)\b", re.I)
_MODULE_GPU_PASS = re.compile(r"^\[(?P<action>[^\]]+)\]\s*(?P<module>[a-z]+)\s+(?P<gpu>\d+)\s+pass:\s*(?P<verdict>TRUE|FALSE)\b", re.I)
_PEQT = re.compile(r"^\[(?P<action>[^\]]+)\]\s*peqt\s+(?P<verdict>true|false)\s*$", re.I)
_MEM = re.compile(r"^\[(?P<action>[^\]]+)\]\s*mem Test\s*(?P<test>\d+)\s*:\s*(?:(?P<passed>PASS)|FAIL)\b", re.I)
_ERROR_WORD = re.compile(r"error", re.I)
_GM = re.compile(r"^\[(?P<action>[^\]]+)\]\s*gm\s+(?P<gpu>\d+)\s+(?P<metric>\S+)\s+violations\s+(?P<count>\d+)", re.I)
_GPU_CELL = r"\[GPU::\s*(?P<node%(n)s>\d+)\s*-\s*(?P<gpu%(n)s>\d+)\s*-\s*(?P<bdf%(n)s>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\]"
_P2P = re.compile(r"^\[(?P<action>[^\]]+)\]\s*p2p\s+(?:%s\s*%s|(?P<old1>\d+)\s+(?P<old2>\d+))\s+(?:peers:\s*)?(?P<peers>true|false)\b"
                  % (_GPU_CELL % {"n": 1}, _GPU_CELL % {"n": 2}), re.I)
# RVS's error lines: "RVS-ERROR [PBQT] [action] internal error" (rvsliblogger.cpp), or a module's own "RVS-PBQT: ...".
_RVS_ERROR = re.compile(r"\bRVS-[A-Z0-9]+\b")
_GPU_TRIPLE = re.compile(r"\[GPU::\s*(?P<node>\d+)\s*-\s*(?P<gpu>\d+)\s*-\s*(?P<bdf>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\]")
_NAME_CELL = re.compile(r"^(?P<name>.*\S)\s+-\s+(?P<gpu>\d+)$")
_PLACE_CELL = re.compile(r"^(?P<index>\d+)\s+-\s+(?P<node>\d+)\s+-\s+(?P<bdf>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)$")
_RESULT_CELL = re.compile(r"^(?:(?P<passed>PASS)|FAIL)$", re.I)
_OLD_VERSION = re.compile(r"ROCm Validation Suite \(version (?P<version>[^)]+)\)")

_MAX_ERRORS = 20


def find_rvs() -> Optional[str]:
    found = gpus.find_rocm_tool("rvs")
    if found:
        return found
    return next((path for path in RVS_PATHS if os.access(path, os.X_OK)), None)


def probe_rvs(options: Options) -> dict[str, Any]:
    """``rvs -c <conf>`` (hydra_expect rvs_conf) or ``rvs -r <level>`` (rvs_level, default 2), its lines read."""
    binary = find_rvs()
    if not binary:
        raise ProbeAbsent("rvs not found %s, nor at %s (the ROCm Validation Suite is not installed): the RVS checks are not run"
                          % (gpus.ROCM_TOOL_PLACES, ", ".join(RVS_PATHS)))
    conf = options.get("rvs_conf")
    level = options.get("rvs_level") or DEFAULT_RVS_LEVEL
    if conf:
        argv = [binary, "-c", str(conf)]
    else:
        if level not in RVS_LEVELS:
            raise ProbeError("expect.rvs_level: %r is not one of %s" % (level, ", ".join(str(n) for n in RVS_LEVELS)))
        argv = [binary, "-r", str(level)]
    ran_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")  # what the message says "when" with
    rc, out, err = command.run(argv, options["timeouts"]["rvs"])
    text = out + ("\n" + err if err else "")
    if NO_PLATFORM in text and not conf:
        raise ProbeAbsent("rvs -r %s: %s (rvs -r has level configurations for MI300X and newer only): set "
                          "hydra_expect.rvs_conf to a configuration file" % (level, NO_PLATFORM))
    data = parse_rvs(text)
    if rc != 0 and not data["results"] and not data["summary"]:
        raise ProbeError("%s exited with rc %d (a command-line, configuration or launch error; RVS exits 0 when a "
                         "test fails): %s" % (" ".join(argv), rc, _first_error(text) or "no output"))
    # Verdicts printed before a non-zero exit are read all the same (the check names the exit status).
    return dict(data, command=" ".join(argv[1:]), exit_code=rc, ran_at=ran_at)


def _rvs_line(line: str) -> dict[str, Any]:
    """What one cleaned RVS line says: {error, version, gpus: [(gpu_id, node, bdf)], action, module, result}."""
    stripped = line.strip()
    found: dict[str, Any] = {}
    if _RVS_ERROR.search(stripped) or stripped.startswith("[ERROR"):
        found["error"] = stripped[:300]
    match = _OLD_VERSION.search(stripped)
    if match:
        found["version"] = match.group("version")
    found["gpus"] = [(t.group("gpu"), int(t.group("node")), t.group("bdf").lower()) for t in _GPU_TRIPLE.finditer(stripped)]
    prefix = _PREFIX.match(line)
    if prefix:
        body = prefix.group("body").strip()
        named = _ACTION_NAME.match(body)
        module_named = _MODULE_NAME.match(body)
        if named:
            found["action"] = named.group("action")
        elif module_named:
            found["module"] = module_named.group("module").lower()
        else:
            found["result"] = _verdict(body)
    return found


def parse_rvs(text: str) -> dict[str, Any]:
    """RVS output -> {version, gpus, results, summary, errors, bad_lines}; each result one verdict line (pass True/False)."""
    gpus: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    actions: dict[str, str] = {}
    version: Optional[str] = None
    action: Optional[str] = None
    bad = BadLines()
    lines = [_ANSI.sub("", line).replace("\r", "") for line in text.splitlines()]
    for _number, _line, found in parse_lines(None, _rvs_line, bad, lines=lines):
        if "error" in found and len(errors) < _MAX_ERRORS:
            errors.append(found["error"])
        version = found.get("version") or version
        for gpu_id, node, bdf in found["gpus"]:
            gpus.setdefault(gpu_id, {}).update(node=node, bdf=bdf)
        if "action" in found:
            action = found["action"]
        elif "module" in found and action:
            actions[action] = found["module"]
        elif found.get("result") is not None:
            result = found["result"]
            result["module"] = result["module"] or actions.get(result["action"])
            results.append(result)
    summary, box_gpus, box_version = _summary_box(lines, bad)
    for gpu_id, facts in box_gpus.items():
        gpus.setdefault(gpu_id, {}).update(facts)
    return {
        "version": box_version.get("RVS version") or version,
        "rocm_version": box_version.get("ROCm version"),
        "gpus": [dict(gpus[gpu_id], gpu_id=gpu_id) for gpu_id in sorted(gpus, key=int)],
        "results": results,
        "summary": summary,
        "errors": errors,
        "bad_lines": bad.as_dict(),
    }


def _verdict(body: str) -> Optional[dict[str, Any]]:
    match = _P2P.match(body)
    if match:
        first = match.group("gpu1") or match.group("old1")
        second = match.group("gpu2") or match.group("old2")
        if first == second:
            return None  # a GPU paired with itself is never its own peer
        return _result(match, "pbqt" if match.group("gpu1") else None, first, match.group("peers").lower() == "true",
                       peer_gpu_id=second, bdf=(match.group("bdf1") or "").lower() or None,
                       peer_bdf=(match.group("bdf2") or "").lower() or None, peers=True)
    match = _GST.match(body)
    if match:
        return _result(match, "gst", match.group("gpu"), match.group("verdict").upper() == "TRUE",
                       value=float(match.group("value")), target=float(match.group("target")))
    match = _GPU_PASS.match(body)
    if match:
        return _result(match, None, match.group("gpu"), match.group("verdict").upper() == "TRUE")
    match = _MODULE_GPU_PASS.match(body)
    if match:
        return _result(match, match.group("module").lower(), match.group("gpu"), match.group("verdict").upper() == "TRUE")
    match = _PEQT.match(body)
    if match:
        return _result(match, "peqt", None, match.group("verdict").lower() == "true")
    match = _MEM.match(body)
    if match:
        return _result(match, "mem", None, match.group("passed") is not None, test=int(match.group("test")))
    match = _GM.match(body)
    if match:
        count = int(match.group("count"))
        return _result(match, "gm", match.group("gpu"), count == 0, metric=match.group("metric"), violations=count)
    return None


def _result(match: Any, module: Optional[str], gpu: Optional[str], passed: bool, **extra: Any) -> dict[str, Any]:
    action = match.group("action").strip()
    out = {"action": action, "module": module, "gpu_id": gpu, "pass": passed,
           "line": match.group(0)[:300]}
    out.update(extra)
    return out


def _cells(line: str) -> Optional[list[str]]:
    stripped = line.strip()
    if not (stripped.startswith("|") and stripped.endswith("|")):
        return None
    return [cell.strip() for cell in stripped[1:-1].split("|")]


def _summary_box(lines: list[str], bad: BadLines) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, str]]:
    """The "RVS Summary" box: per-action results, the GPU map (name - gpu_id over index - node - BDF), versions.
    A row that cannot be read is counted in ``bad``."""
    summary: list[dict[str, Any]] = []
    gpus: dict[str, dict[str, Any]] = {}
    facts: dict[str, str] = {}
    in_results = False
    names: Optional[list[Optional[tuple[str, str]]]] = None
    for number, line in enumerate(lines, 1):
        cells = _cells(line)
        if cells is None:
            names = None if not line.strip().startswith("+") else names
            continue
        if len(cells) == 3 and cells[0] == "Action Name" and cells[1] == "Module":
            in_results = True
            continue
        verdict = _RESULT_CELL.match(cells[2]) if in_results and len(cells) == 3 else None
        if verdict:
            summary.append({"action": cells[0], "module": cells[1].lower(), "pass": verdict.group("passed") is not None})
            continue
        parsed_names = [_NAME_CELL.match(cell) for cell in cells]
        if any(parsed_names) and not any(_PLACE_CELL.match(cell) for cell in cells):
            names = [(m.group("gpu"), m.group("name")) if m else None for m in parsed_names]
            if len(cells) == 2 and not all(parsed_names):
                # A two-column fact row ("| RVS version | 1.6.75 |") whose value happens to end in "- <number>".
                facts[cells[0]] = cells[1]
            continue
        if names is not None:
            for position, cell in enumerate(cells):
                place = _PLACE_CELL.match(cell)
                if place and position < len(names) and names[position]:
                    gpu_id, name = names[position]  # type: ignore[misc]
                    try:
                        gpus[gpu_id] = {"name": name, "index": int(place.group("index")), "node": int(place.group("node")),
                                        "bdf": place.group("bdf").lower()}
                    except LINE_ERRORS as exc:
                        bad.add(number, line, exc)
            names = None
            continue
        if len(cells) == 2 and cells[0] and cells[1]:
            facts[cells[0]] = cells[1]
    return summary, gpus, facts


def _first_error(text: str) -> str:
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines() if line.strip()]
    for line in lines:
        if _ERROR_WORD.search(line):
            return line[:300]
    return lines[0][:300] if lines else ""
