# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""DCGM's diagnostic judged per test and GPU: a pure function of the dcgm_diag probe (and nvidia-smi's GPU names).

What dcgmi writes and what it means (NVIDIA/DCGM source, recorded runs; docs/levels.md lists the sources): JSON
statuses are Pass, Skip, Fail (4.x adds Not Run) and a warning is written as "Fail" too, told apart only by the
severity of its warnings (``error_severity``, renumbered in DCGM 3.3.1: before it 0 MONITOR, 1 ISOLATE, 2 UNKNOWN;
since 0 NONE, 1 MONITOR, 2 ISOLATE, 3 UNKNOWN, 4 TRIAGE, 5 CONFIG, 6 RESET). A Fail whose every warning is NONE,
MONITOR or CONFIG (persistence mode off: error 29, severity 5) is a WARN; any other Fail is a FAIL. Skip and Not
Run are not a pass: a GPU no test beyond the software checks ran on is WARN ("not tested"). A test that fails with
no entity at fault (a failing ``test_summary``, every GPU Pass: a diag-internal error, NVIDIA/DCGM#253) is an ERROR,
not a GPU fault. Exit 205 asks to isolate a GPU: FAIL whatever the rows say.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import dcgm as dcgm_probe
from ansible_collections.continuum.hydra.plugins.module_utils._host.versions import version_tuple
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_name, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_OK, SKIP, WARN, worst

# error_severity values that mean "not a fault" (a warning dcgmi writes as Fail), per numbering.
_BENIGN_SINCE_331 = frozenset({0, 1, 5})  # NONE, MONITOR, CONFIG
_BENIGN_BEFORE_331 = frozenset({0})  # MONITOR
_SEVERITY_NAMES_SINCE_331 = {0: "NONE", 1: "MONITOR", 2: "ISOLATE", 3: "UNKNOWN", 4: "TRIAGE", 5: "CONFIG", 6: "RESET"}
_SEVERITY_NAMES_BEFORE_331 = {0: "MONITOR", 1: "ISOLATE", 2: "UNKNOWN"}

# The Deployment (software) tests run once for the host; a GPU is "tested" only by the others.
_SOFTWARE_CATEGORY = "deployment"

NOT_TESTED = "not tested"
FAULT_ADVICE = ("Drain the node and re-run `dcgmi diag -r 3` on it; a GPU that fails again goes to repair/RMA with the "
                "dcgmi JSON (its error ids name the fault: DCGM's dcgm_errors.h / the DCGM error-code table).")
WARN_ADVICE = ("Read each warning: a node setting (persistence mode, ECC, a GPU process running) is fixed on the node; "
               "a skipped test usually means the SKU's DCGM allowlist or a missing package (EUD): see details.")
ERROR_ADVICE = ("Re-run `dcgmi diag -r <level> -j` by hand: a test that failed with no GPU at fault, or an exit code the "
                "JSON does not explain, is a diagnostic problem (host engine, CPU affinity in a job, a GPU process), "
                "not a verdict on the GPUs.")


def new_severity_numbering(data: Mapping[str, Any]) -> bool:
    """Whether error_severity uses the 3.3.1+ numbering (4.x and 3.3.x documents without a version assumed so)."""
    version = version_tuple(data.get("version"))
    if version is not None:
        return version >= (3, 3, 1)
    return data.get("format") in ("4.x", "3.3")


def is_benign(warnings: Sequence[Mapping[str, Any]], new_numbering: bool) -> bool:
    """A Fail that is really a warning: it has warnings and every one has a benign severity."""
    benign = _BENIGN_SINCE_331 if new_numbering else _BENIGN_BEFORE_331
    severities = [w.get("error_severity") for w in warnings]
    return bool(severities) and all(isinstance(s, int) and not isinstance(s, bool) and s in benign for s in severities)


def severity_name(value: Any, new_numbering: bool) -> Optional[str]:
    names = _SEVERITY_NAMES_SINCE_331 if new_numbering else _SEVERITY_NAMES_BEFORE_331
    return names.get(value) if isinstance(value, int) else None


def classify(row: Mapping[str, Any], new_numbering: bool) -> str:
    """One row's status: FAIL, WARN, PASS, or SKIP (skipped or not run)."""
    result = row["result"]
    if result == dcgm_probe.FAIL_RESULT:
        return WARN if is_benign(row.get("warnings") or [], new_numbering) else FAIL
    if result == dcgm_probe.WARN_RESULT:
        return WARN
    if result == dcgm_probe.PASS_RESULT:
        return PASS
    return SKIP


def _messages(warnings: Iterable[Mapping[str, Any]], new_numbering: bool) -> list[str]:
    out = []
    for warning in warnings:
        tags = []
        if warning.get("error_id") is not None:
            tags.append("error %s" % warning["error_id"])
        name = severity_name(warning.get("error_severity"), new_numbering)
        if name:
            tags.append(name)
        text = warning.get("message") or "(no message)"
        out.append("%s [%s]" % (text, ", ".join(tags)) if tags else text)
    return out


def _gpu_names(probes: Probes) -> dict[int, dict[str, Any]]:
    """DCGM GPU id -> the GPU as nvidia-smi names it (DCGM ids follow the NVML index on a normal host)."""
    envelope = probes.get("nvidia_smi") or {}
    if envelope.get("status") != READ_OK:
        return {}
    out = {}
    for gpu in (envelope.get("data") or {}).get("gpus") or []:
        if isinstance(gpu.get("index"), int):
            out[gpu["index"]] = gpu_ref(gpu)
    return out


def _label(gpu: Optional[int], entity_group: str = "GPU", entity_id: Any = None) -> str:
    if gpu is not None:
        return gpu_name({"index": gpu})
    if entity_id is not None:
        return "%s %s" % (entity_group, entity_id)
    return "host"


@check("gpu.dcgm_diag", "DCGM diagnostic (dcgmi diag)", requires=("dcgm_diag",), uses=("nvidia_smi",))
def dcgm_diag(probes: Probes, expect: Expect) -> Finding:
    """Reads `dcgmi diag -r <dcgm_diag_level> -j` (default level 2: software, memory, PCIe; 3 adds the stress and
    power tests, ~15-30 min) in every JSON generation (2.x-3.x "DCGM GPU Diagnostic", 4.x "DCGM Diagnostic"),
    one result per test and GPU, the JSON before the exit code. Level deep; SKIP where dcgmi is not installed.

    FAIL when a test fails on a GPU with a fault severity (ISOLATE, RESET, TRIAGE, UNKNOWN, or none given), when
    dcgmi exits 205 (isolate the GPU), or when nvidia-smi lists a GPU the JSON neither tests nor lists (DCGM saw
    fewer GPUs); the GPUs and tests are named. WARN when a failure is only a warning (dcgmi writes warnings as Fail:
    every warning of severity NONE, MONITOR or CONFIG, e.g. persistence mode off), or when a GPU had no test
    beyond the software checks pass (skipped, not run, or left out of a test's results: not tested), a GPU
    DCGM's entity list names has no result, or no GPU has any. ERROR when a test fails with no GPU at fault (a
    diagnostic error), when dcgmi could not run or its output is not a diag document (the reason named), or
    when its exit code or an --iterations Overall Result reports a failure the JSON does not show. PASS otherwise;
    skipped tests are listed (Skip is not a pass: they are named in the message).
    """
    data = probes["dcgm_diag"]["data"]
    new_numbering = new_severity_numbering(data)
    names = _gpu_names(probes)
    rows = data.get("rows") or []
    exit_code = data.get("exit_code")
    gpus: OrderedDict[Any, dict[str, Any]] = OrderedDict()
    host_problems: list[tuple[str, str]] = []  # (status, phrase) of host-wide (Deployment) results
    hardware_tests = _hardware_tests(data)
    host_skipped: list[str] = []  # host-wide (no GPU named) results of tests beyond the software checks not run
    for row in rows:
        status = classify(row, new_numbering)
        if row.get("gpu") is None and row.get("entity_id") is None:
            if status == SKIP and row["test"] in hardware_tests:
                host_skipped.append(row["test"])
            if status in (FAIL, WARN):
                template = "%s failed: %s" if status == FAIL else "%s warned: %s"
                host_problems.append((status, template % (row["test"], "; ".join(
                    _messages(row.get("warnings") or [], new_numbering)) or row.get("status"))))
            continue
        key = (row.get("entity_group") or "GPU", row.get("entity_id"))
        entry = gpus.setdefault(key, _gpu_entry(row, names, data))
        entry["tests"].setdefault(row["test"], [])
        entry["tests"][row["test"]].append(row["result"])
        software = str(row.get("category") or "").lower() == _SOFTWARE_CATEGORY
        if status == FAIL:
            entry["failed_tests"].append(row["test"])
        elif status == WARN:
            entry["warned_tests"].append(row["test"])
        elif status == SKIP:
            entry["skipped_tests"].append("%s %s" % (row["test"], "not run" if row["result"] == dcgm_probe.NOT_RUN_RESULT else "skipped"))
        elif not software:
            entry["hardware_tested"] = True
        entry["messages"] += _messages(row.get("warnings") or [], new_numbering)
    statuses = []
    phrases: dict[str, list[str]] = {FAIL: [], WARN: [], ERROR: []}
    for entry in gpus.values():
        status = FAIL if entry["failed_tests"] else WARN if entry["warned_tests"] else PASS
        label = entry.pop("label")
        if entry["failed_tests"]:
            phrases[FAIL].append("%s failed %s" % (label, ", ".join(OrderedDict.fromkeys(entry["failed_tests"]))))
        if entry["warned_tests"]:
            phrases[WARN].append("%s warned in %s" % (label, ", ".join(OrderedDict.fromkeys(entry["warned_tests"]))))
        if not entry.pop("hardware_tested") and not entry["failed_tests"] and (entry["skipped_tests"] or hardware_tests):
            # Skip and Not Run are not a pass, nor is a test whose results leave this GPU out.
            status = worst((status, WARN))
            phrases[WARN].append("%s %s (%s)" % (label, NOT_TESTED, ", ".join(entry["skipped_tests"]) or
                                                 "no result in %s" % ", ".join(hardware_tests)))
        entry["status"] = status
        entry["messages"] = list(OrderedDict.fromkeys(entry["messages"]))[:10]
        statuses.append(status)
    for status, phrase in host_problems:
        statuses.append(status)
        phrases[status].append(phrase)
    _missing_gpus(data, gpus, names, statuses, phrases)
    if hardware_tests and not any(group == "GPU" for group, dummy in gpus):
        # No GPU has a result: every test beyond the software checks was skipped, not run, or named no GPU.
        statuses.append(WARN)
        phrases[WARN].append("no GPU tested: %s" % ", ".join(
            "%s %s" % (name, "skipped" if name in host_skipped else "without a GPU result") for name in hardware_tests))
    overall_result = str(data.get("overall_result") or "").strip().lower()
    if overall_result and overall_result != dcgm_probe.PASS_RESULT and FAIL not in statuses and WARN not in statuses:
        statuses.append(ERROR)
        phrases[ERROR].append("--iterations Overall Result is %r but no iteration's result fails" % data["overall_result"])
    _summary_errors(data, gpus, new_numbering, statuses, phrases)
    if exit_code == dcgm_probe.EXIT_ISOLATE:
        statuses.append(FAIL)
        phrases[FAIL].insert(0, "dcgmi exited %d: %s" % (exit_code, dcgm_probe.exit_meaning(exit_code)))
    elif exit_code not in (None, 0) and FAIL not in statuses and WARN not in statuses and ERROR not in statuses:
        statuses.append(ERROR)
        phrases[ERROR].append("dcgmi exited %s (%s) but its JSON reports no failure" % (exit_code, dcgm_probe.exit_meaning(exit_code)))
    if data.get("runtime_error"):
        statuses.append(ERROR)
        phrases[ERROR].append("runtime error: %s" % data["runtime_error"])
    details = {
        "command": data.get("command"), "version": data.get("version"), "format": data.get("format"),
        "exit_code": exit_code, "exit_meaning": data.get("exit_meaning"), "gpus": list(gpus.values()),
        "host": [phrase for dummy, phrase in host_problems], "tests": _tests_table(data), "ran_at": data.get("ran_at"),
    }
    if not rows:
        return finding(ERROR, "dcgmi diag reported no test result", details=details, remediation=ERROR_ADVICE)
    overall = worst(statuses) if statuses else PASS
    if overall == PASS:
        skipped = sorted(OrderedDict.fromkeys(s for entry in gpus.values() for s in entry["skipped_tests"]))
        count = len(details["tests"])
        message = "%d GPU%s passed %d test%s" % (len(gpus), "" if len(gpus) == 1 else "s", count, "" if count == 1 else "s")
        if skipped:
            message += "; skipped, not passed: %s" % ", ".join(skipped)
        return finding(PASS, "dcgmi diag -r %s: %s" % (data.get("level", "?"), message), details=details)
    shown = phrases[overall][:4]
    more = " (and %d more)" % (len(phrases[overall]) - 4) if len(phrases[overall]) > 4 else ""
    advice = {FAIL: FAULT_ADVICE, WARN: WARN_ADVICE, ERROR: ERROR_ADVICE}[overall]
    # When it happened: this run's own diagnostic, never an older verdict carried over.
    ran = " (diagnostic run at %s)" % data["ran_at"] if data.get("ran_at") else ""
    return finding(overall, "dcgmi diag -r %s: %s%s%s" % (data.get("level", "?"), "; ".join(shown), more, ran), details=details,
                   remediation=advice)


def _gpu_entry(row: Mapping[str, Any], names: Mapping[int, dict[str, Any]], data: Mapping[str, Any]) -> dict[str, Any]:
    gpu = row.get("gpu")
    if gpu is not None:
        ref = dict(names.get(gpu) or {"index": gpu, "pci_bus_id": None, "uuid": None, "name": None})
    else:
        ref = {"index": None, "pci_bus_id": None, "uuid": None, "name": None}
    serial = next((e.get("serial") for e in data.get("entities") or []
                   if e.get("entity_group") == row.get("entity_group") and e.get("entity_id") == row.get("entity_id")), None)
    ref.update({"dcgm_entity": "%s %s" % (row.get("entity_group") or "GPU", row.get("entity_id")), "serial": serial or ref.get("serial"),
                "tests": OrderedDict(), "failed_tests": [], "warned_tests": [], "skipped_tests": [], "messages": [], "hardware_tested": False,
                "label": _label(gpu, row.get("entity_group") or "GPU", row.get("entity_id"))})
    return ref


def _hardware_tests(data: Mapping[str, Any]) -> list[str]:
    """The tests beyond the host-wide software checks (Deployment) the document lists, results or not."""
    names = [test["test"] for test in data.get("tests") or [] if str(test.get("category") or "").lower() != _SOFTWARE_CATEGORY]
    return list(OrderedDict.fromkeys(names))


def _missing_gpus(data: Mapping[str, Any], gpus: Mapping[Any, Mapping[str, Any]], names: Mapping[int, Mapping[str, Any]],
                  statuses: list[str], phrases: dict[str, list[str]]) -> None:
    """A GPU nvidia-smi lists that DCGM neither tested nor names in its entity list is FAIL (DCGM saw fewer GPUs:
    one is lost to it); a GPU DCGM's entity list names with no result is WARN (not tested). Only when the
    document names GPUs at all (a DCGM 2.x/3.x -r 1 document has host-wide results only)."""
    seen = set(int(entry["index"]) for entry in gpus.values() if entry.get("index") is not None)
    listed = set(e.get("entity_id") for e in data.get("entities") or []
                 if e.get("entity_group") == "GPU" and isinstance(e.get("entity_id"), int))
    if not seen and not listed:
        return
    lost = sorted(set(names) - seen - listed)
    if lost:
        statuses.append(FAIL)
        phrases[FAIL].insert(0, "%s missing from dcgmi diag's results (nvidia-smi lists %s; DCGM tested %s)" % (
            ", ".join(_label(gpu) for gpu in lost), ", ".join(str(gpu) for gpu in sorted(names)),
            ", ".join(str(gpu) for gpu in sorted(seen)) or "none"))
    untested = sorted(listed - seen)
    if untested:
        statuses.append(WARN)
        phrases[WARN].append("%s %s (in DCGM's entity list, no result)" % (", ".join(_label(gpu) for gpu in untested), NOT_TESTED))


def _summary_errors(data: Mapping[str, Any], gpus: Mapping[Any, Mapping[str, Any]], new_numbering: bool,
                    statuses: list[str], phrases: dict[str, list[str]]) -> None:
    """4.x test_summary: a test that fails while no entity failed or warned in it is a diagnostic error (or a warning)."""
    for test in data.get("tests") or []:
        if test.get("summary") != dcgm_probe.FAIL_RESULT:
            continue
        blamed = any(test["test"] in entry["failed_tests"] or test["test"] in entry["warned_tests"] for entry in gpus.values())
        if blamed:
            continue
        messages = "; ".join(_messages(test.get("warnings") or [], new_numbering)) or "no GPU at fault"
        status = WARN if is_benign(test.get("warnings") or [], new_numbering) else ERROR
        statuses.append(status)
        phrases[status].append("%s failed as a test with no GPU at fault (diagnostic error): %s" % (test["test"], messages))


def _tests_table(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per test: its category, summary status (4.x) and each entity's result, as dcgmi reported them."""
    table: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for row in data.get("rows") or []:
        entry = table.setdefault(row["test"], {"test": row["test"], "category": row.get("category"), "summary": None, "results": {}})
        entry["results"][_label(row.get("gpu"), row.get("entity_group") or "GPU", row.get("entity_id"))] = row["result"]
    for test in data.get("tests") or []:
        if test["test"] in table:
            table[test["test"]]["summary"] = test.get("summary")
    return list(table.values())
