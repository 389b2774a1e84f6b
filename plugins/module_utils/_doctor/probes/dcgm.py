# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""DCGM's diagnostic: ``dcgmi diag -r <level> -j``, run once (doctor level ``deep``) and read into plain rows.

Every JSON generation of ``dcgmi diag -j`` is read (NVIDIA/DCGM dcgmi/Diag.cpp, nvvs NvvsJsonStrings.h, and the
recordings in tests/fixtures/dcgm-diag/):

- 2.x to 3.2: root ``"DCGM GPU Diagnostic"`` > ``test_categories`` > ``tests`` > ``results``, each result naming its
  GPUs in ``gpu_ids`` (a string, "0" or "0,1,2,3"; absent for the host-wide Deployment tests), ``warnings`` and
  ``info`` as strings.
- 3.3: the same tree, ``gpu_id`` (a string) per result, ``warnings`` a list of objects (``warning``, ``error_id``,
  ``error_category``, ``error_severity``; a Deployment warning carries its message under ``warnings``).
- 4.x: root ``"DCGM Diagnostic"``; results name ``entity_group`` / ``entity_id``; each test has a ``test_summary``;
  ``metadata`` and ``entity_groups`` sit beside the root object; status ``Not Run`` appears.
- ``--iterations``: ``{"iterations": [document, ...], "Overall Result": ...}``; a run that could not start:
  ``{"<root>": {"runtime_error": ...}}``. Text may precede the JSON: it is read from the first ``{``.

The JSON is read before the exit code: 226 (a test failed) and 205 (a failure asks to isolate the GPU) come with a
complete document. A probe reads, never judges: statuses are normalised to pass / fail / warn / skip / notrun and
the verdict is checks/dcgm.py's. Output that is not such a document is a ProbeError naming what is wrong.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError

Options = Mapping[str, Any]

DIAG_LEVELS = (1, 2, 3, 4)
DEFAULT_DIAG_LEVEL = 2
# timeouts.dcgm_diag when unset, per -r level: dcgmi's own help says r1 seconds, r2 ~2 min, r3 ~15 min, r4 longer;
# recorded runs took ~10 min (r3, 8 GPUs) and over an hour (r4). Each default leaves room for slow hosts.
DIAG_TIMEOUTS = {1: 120, 2: 600, 3: 2700, 4: 7200}

ROOT_KEYS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")  # 2.x-3.x, 4.x

# dcgmi diag's exit status is the dcgmReturn_t as an unsigned byte (dcgmi/main_dcgmi.cpp).
EXIT_TEST_FAILED = 226  # DCGM_ST_NVVS_ERROR (-30)
EXIT_ISOLATE = 205  # DCGM_ST_NVVS_ISOLATE_ERROR (-51)
EXIT_MEANINGS = {
    0: "no test failed",
    EXIT_TEST_FAILED: "a test failed",
    EXIT_ISOLATE: "a failure asks to isolate the GPU",
    203: "the diagnostic process (NVVS) was killed",
    217: "a diagnostic is already running",
    255: "bad parameter",
}

# Status words as dcgmi writes them (any case), normalised.
PASS_RESULT = "pass"
FAIL_RESULT = "fail"
WARN_RESULT = "warn"
SKIP_RESULT = "skip"
NOT_RUN_RESULT = "notrun"
_RESULTS = {"pass": PASS_RESULT, "fail": FAIL_RESULT, "warn": WARN_RESULT, "skip": SKIP_RESULT, "skipped": SKIP_RESULT,
            "not run": NOT_RUN_RESULT, "notrun": NOT_RUN_RESULT, "not_run": NOT_RUN_RESULT}
# JSON keys of a warning object (nvvs/include/NvvsJsonStrings.h NVVS_WARNINGS, NVVS_WARNING: the singular).
WARNINGS_KEY = "warnings"
WARNING_KEY = WARNINGS_KEY[:-1]
ACCEPTED_STATUSES = "Pass, Fail, Warn, Skip, Not Run"

_MAX_TEXT = 500  # one info or warning text, cut (4.x info lists carry full bandwidth tables)


def exit_meaning(rc: int) -> str:
    if rc in EXIT_MEANINGS:
        return EXIT_MEANINGS[rc]
    if rc > 128:
        return "killed by signal %d or a DCGM error" % (rc - 128)
    return "DCGM error"


def probe_dcgm_diag(options: Options) -> dict[str, Any]:
    """``dcgmi diag -r <level> -j`` (hydra_expect dcgm_diag_level, default 2; dcgm_host for a remote host engine)."""
    binary = command.find_binary("dcgmi")
    if not binary:
        raise ProbeAbsent("dcgmi not found (DCGM is not installed): the DCGM diagnostic is not run")
    level = options.get("dcgm_diag_level") or DEFAULT_DIAG_LEVEL
    if level not in DIAG_LEVELS:
        raise ProbeError("expect.dcgm_diag_level: %r is not one of %s" % (level, ", ".join(str(n) for n in DIAG_LEVELS)))
    argv = [binary, "diag", "-r", str(level), "-j"]
    if options.get("dcgm_host"):
        argv += ["--host", str(options["dcgm_host"])]
    ran_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")  # what the message says "when" with
    rc, out, err = command.run(argv, options["timeouts"]["dcgm_diag"])
    return dict(read_diag(out, rc, err), level=level, command=" ".join(argv[1:]), ran_at=ran_at)


def read_diag(stdout: str, rc: int, stderr: str = "") -> dict[str, Any]:
    """dcgmi diag -j's output and exit status -> plain data; ProbeError naming the problem when it is unreadable."""
    start = stdout.find("{")
    if start < 0:
        said = _first_line(stderr, stdout)
        if rc == 0:
            raise ProbeError("dcgmi diag -j printed no JSON (rc 0): %s" % (said or "no output"))
        raise ProbeError("dcgmi diag exited with rc %d (%s) without a JSON result: %s" % (rc, exit_meaning(rc), said or "no output"))
    try:
        doc, dummy = json.JSONDecoder().raw_decode(stdout[start:])
    except ValueError as exc:
        raise ProbeError("dcgmi diag -j (rc %d): output is not valid JSON: %s" % (rc, exc)) from None
    data = parse_diag_json(doc)
    data["exit_code"] = rc
    data["exit_meaning"] = exit_meaning(rc)
    data["stderr"] = _first_line(stderr) or None
    return data


def parse_diag_json(doc: Any) -> dict[str, Any]:
    """A parsed ``dcgmi diag -j`` document (any generation, or an --iterations wrapper) -> rows and metadata."""
    if not isinstance(doc, dict):
        raise ProbeError("dcgmi diag -j: the JSON is a %s, not an object" % type(doc).__name__)
    if isinstance(doc.get("iterations"), list):
        parts = [_document(item, "iterations[%d]" % number) for number, item in enumerate(doc["iterations"])]
        if not parts:
            raise ProbeError("dcgmi diag -j: 'iterations' is empty")
        data = dict(parts[0])
        data["rows"], data["tests"] = [], []
        for number, part in enumerate(parts):
            data["rows"] += [dict(row, iteration=number) for row in part["rows"]]
            data["tests"] += [dict(test, iteration=number) for test in part["tests"]]
        data["iterations"] = len(parts)
        data["overall_result"] = doc.get("Overall Result")
        data["global_warning"] = _text(doc.get("Warning")) or data.get("global_warning")
        return data
    return _document(doc, "document")


def _document(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ProbeError("dcgmi diag -j: %s is a %s, not an object" % (where, type(doc).__name__))
    root_key = next((key for key in ROOT_KEYS if key in doc), None)
    if root_key is None:
        raise ProbeError("dcgmi diag -j: no %s object in the %s (keys: %s)"
                         % (" or ".join(repr(k) for k in ROOT_KEYS), where, ", ".join(sorted(str(k) for k in doc)) or "none"))
    root = doc[root_key]
    if not isinstance(root, dict):
        raise ProbeError("dcgmi diag -j: %r is a %s, not an object with test_categories" % (root_key, type(root).__name__))
    metadata: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    runtime_error = _text(root.get("runtime_error") or doc.get("runtime_error"))
    categories = root.get("test_categories")
    if categories is None:
        if runtime_error:
            raise ProbeError("dcgmi diag could not run: %s" % runtime_error)
        raise ProbeError("dcgmi diag -j: %r has no test_categories (keys: %s)" % (root_key, ", ".join(sorted(root)) or "none"))
    if not isinstance(categories, list):
        raise ProbeError("dcgmi diag -j: test_categories is a %s, not a list" % type(categories).__name__)
    rows: list[dict[str, Any]] = []
    tests: list[dict[str, Any]] = []
    for number, category in enumerate(categories):
        if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
            raise ProbeError("dcgmi diag -j: test_categories[%d] has no list of tests" % number)
        for test in category["tests"]:
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                raise ProbeError("dcgmi diag -j: a test of category %r has no name" % category.get("category"))
            name = test["name"]
            results = test.get("results")
            if not isinstance(results, list):
                raise ProbeError("dcgmi diag -j: test %r has no list of results" % name)
            for result in results:
                rows += _rows(result, name, category.get("category"))
            tests.append(_test_summary(test, name, category.get("category")))
    entities = _entities(doc.get("entity_groups"))
    return {
        "format": _format(root_key, rows),
        "root": root_key,
        "version": _text(root.get("version") or metadata.get("version") or doc.get("version")),
        "driver_version": _text(root.get("Driver Version Detected") or metadata.get("Driver Version Detected")),
        "runtime_error": runtime_error,
        "global_warning": _text(root.get("Warning") or doc.get("Warning")),
        "entities": entities,
        "rows": rows,
        "tests": tests,
    }


def _format(root_key: str, rows: list[dict[str, Any]]) -> str:
    if root_key == "DCGM Diagnostic":
        return "4.x"
    if any(row.get("id_key") == "gpu_id" for row in rows):
        return "3.3"
    return "2.x-3.2"


def _rows(result: Any, test: str, category: Any) -> list[dict[str, Any]]:
    """One result object -> one row per GPU it names (one row with gpu None for a host-wide result)."""
    if not isinstance(result, dict):
        raise ProbeError("dcgmi diag -j: a result of test %r is a %s, not an object" % (test, type(result).__name__))
    status = result.get("status")
    normalised = normalise_status(status, test)
    warnings = _warnings(result.get("warnings"))
    info = _texts(result.get("info"))
    base = {"test": test, "category": category, "result": normalised, "status": status, "warnings": warnings, "info": info,
            "entity_group": "GPU", "entity_id": None, "gpu": None, "id_key": None}
    if "entity_id" in result:
        group = result.get("entity_group") or "GPU"
        entity = _int(result.get("entity_id"), test, "entity_id")
        return [dict(base, entity_group=group, entity_id=entity, gpu=entity if group == "GPU" else None, id_key="entity_id")]
    for key in ("gpu_id", "gpu_ids"):
        if key in result and result[key] not in (None, ""):
            ids = [_int(part, test, key) for part in str(result[key]).split(",") if part.strip()]
            return [dict(base, entity_id=gpu, gpu=gpu, id_key=key) for gpu in ids]
    return [base]


def _test_summary(test: Mapping[str, Any], name: str, category: Any) -> dict[str, Any]:
    summary = test.get("test_summary")
    if not isinstance(summary, dict):
        return {"test": name, "category": category, "summary": None, "warnings": [], "info": []}
    return {"test": name, "category": category, "summary": normalise_status(summary.get("status"), name + " test_summary"),
            "warnings": _warnings(summary.get("warnings")), "info": _texts(summary.get("info"))}


def normalise_status(status: Any, where: str) -> str:
    word = _RESULTS.get(str(status).strip().lower()) if isinstance(status, str) else None
    if word is None:
        raise ProbeError("dcgmi diag -j: %s has status %r; accepted: %s" % (where, status, ACCEPTED_STATUSES))
    return word


def _warnings(value: Any) -> list[dict[str, Any]]:
    """Warnings in every generation's shape -> [{message, error_id, error_category, error_severity}]."""
    if value is None or value == "":
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            # 3.3 Deployment warnings carry the message under the plural key (dcgmi bug), every other one the singular.
            message = item.get(WARNING_KEY, item.get(WARNINGS_KEY))
            out.append({"message": _text(message), "error_id": item.get("error_id"),
                        "error_category": item.get("error_category"), "error_severity": item.get("error_severity")})
        elif str(item).strip():
            out.append({"message": _text(item), "error_id": None, "error_category": None, "error_severity": None})
    return out


def _entities(groups: Any) -> list[dict[str, Any]]:
    """4.x entity_groups -> [{entity_group, entity_id, device_id, serial}] (serial None where not supported)."""
    out = []
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict):
            continue
        for entity in group.get("entities") or []:
            if isinstance(entity, dict):
                serial = entity.get("serial_num")
                out.append({"entity_group": group.get("entity_group"), "entity_id": entity.get("entity_id"),
                            "device_id": entity.get("device_id"),
                            "serial": None if not serial or "NOT_SUPPORTED" in str(serial) else serial})
    return out


def _int(value: Any, test: str, key: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ProbeError("dcgmi diag -j: test %r names %s %r, not a number" % (test, key, value)) from None


def _texts(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    return [_text(item) or "" for item in (value if isinstance(value, list) else [value]) if str(item).strip()]


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    text = " ".join(str(value).split())
    return text[:_MAX_TEXT] if text else None


def _first_line(*texts: str) -> str:
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()[:300]
    return ""
