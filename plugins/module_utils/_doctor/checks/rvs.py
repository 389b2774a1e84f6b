# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""AMD's ROCm Validation Suite judged per action and GPU: a pure function of the rvs probe.

RVS exits 0 when a test fails; the verdict is read from its result lines (probes/rvs.py) and the summary box.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS

FAULT_ADVICE = ("Drain the node and re-run the failing RVS action on its GPU (`rvs -c <conf> -i <gpu_id>`); a GPU that "
                "fails again goes to repair/RMA with the RVS log.")
ERROR_ADVICE = ("Run the same rvs command by hand: it printed no verdict doctor knows (a module that only measures, "
                "an unknown configuration, or an error before the tests ran).")


def _gpu(gpu_id: Any, known: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    facts = dict(known.get(str(gpu_id)) or {})
    return {"gpu_id": gpu_id, "index": facts.get("index"), "pci_bus_id": facts.get("bdf"), "name": facts.get("name")}


def _label(gpu: Mapping[str, Any]) -> str:
    where = gpu.get("pci_bus_id")
    return "GPU %s%s" % (gpu["gpu_id"], " (%s)" % where if where else "")


@check("gpu.rvs", "ROCm Validation Suite (rvs)", requires=("rvs",))
def rvs_results(probes: Probes, expect: Expect) -> Finding:
    """Reads `rvs -r <rvs_level>` (default 2: PCIe link, HBM, PCIe and xGMI bandwidth; 3 adds GEMM stress) or
    `rvs -c <rvs_conf>`, from its result lines: gst `met: TRUE|FALSE`, iet/smqt/pulse `pass:`, peqt `true|false`,
    mem `Test N : PASS|FAIL`, gm violations, pbqt/pqt `p2p ... peers:true|false`, and the RVS Summary box's
    per-action PASS/FAIL. Level deep; SKIP where rvs is not installed or has no level configuration for the GPU.

    FAIL when any result line or summary row fails (the GPUs named by gpu_id and PCI address where RVS prints
    them): two distinct GPUs that pbqt finds are not peers (`peers:false`, then `p2p-bandwidth No peers found`)
    are a FAIL naming the pair, as the action asked to test the link between them. The verdicts are read before
    the exit status: a FAIL stays a FAIL whatever rvs exited with; passing verdicts with a non-zero exit are an
    ERROR naming it (RVS exits 0 on test failures: non-zero is a command-line, configuration or launch error).
    ERROR too when rvs prints no verdict at all (nothing judged is not healthy) or prints error lines
    (`[ERROR ]`, `RVS-ERROR [<MODULE>] ... internal error`) beside passing results. Error lines are named in the
    message whatever the verdict. PASS otherwise.
    """
    data = probes["rvs"]["data"]
    known = dict((str(g.get("gpu_id")), g) for g in data.get("gpus") or [])
    results = data.get("results") or []
    summary = data.get("summary") or []
    failed: OrderedDict[str, dict[str, Any]] = OrderedDict()
    phrases = []
    for result in results:
        if result.get("pass"):
            continue
        where = "%s (%s)" % (result["action"], result.get("module") or "?")
        if result.get("peers"):
            pair = [dict(_gpu(gid, known), pci_bus_id=_gpu(gid, known)["pci_bus_id"] or bdf)
                    for gid, bdf in ((result["gpu_id"], result.get("bdf")), (result["peer_gpu_id"], result.get("peer_bdf")))]
            for gpu in pair:
                entry = failed.setdefault(str(gpu["gpu_id"]), dict(gpu, failed_actions=[], lines=[]))
                entry["failed_actions"].append(where)
                entry["lines"].append(result.get("line"))
            phrases.append("%s and %s are not peers in %s" % (_label(pair[0]), _label(pair[1]), where))
            continue
        if result.get("gpu_id") is not None:
            gpu = failed.setdefault(str(result["gpu_id"]), dict(_gpu(result["gpu_id"], known), failed_actions=[], lines=[]))
            gpu["failed_actions"].append(where)
            gpu["lines"].append(result.get("line"))
            phrases.append("%s failed %s" % (_label(gpu), where))
        else:
            phrases.append("%s failed: %s" % (where, result.get("line")))
    lines_failed = set(result["action"] for result in results if not result.get("pass"))
    for row in summary:
        if not row.get("pass") and row["action"] not in lines_failed:
            phrases.append("action %s (%s) FAIL in the RVS summary" % (row["action"], row.get("module")))
    errors = data.get("errors") or []
    rc = data.get("exit_code")
    details = {"command": data.get("command"), "version": data.get("version"), "rocm_version": data.get("rocm_version"),
               "gpus": list(failed.values()), "summary": summary, "errors": errors, "results": len(results),
               "exit_code": rc, "ran_at": data.get("ran_at")}
    # How the run ended, for every message: a non-zero exit and RVS's own error lines are never left out.
    ended = "".join(("; rvs exited with rc %s" % rc if rc else "", "; first error: %s" % errors[0] if errors else ""))
    if phrases:
        shown = phrases[:4]
        more = " (and %d more)" % (len(phrases) - 4) if len(phrases) > 4 else ""
        # When it happened: this run's own diagnostic, never an older verdict carried over.
        ran = " (diagnostic run at %s)" % data["ran_at"] if data.get("ran_at") else ""
        return finding(FAIL, "rvs: " + "; ".join(shown) + more + ended + ran, details=details, remediation=FAULT_ADVICE)
    if not results and not summary:
        reason = "; first error: %s" % data["errors"][0] if data.get("errors") else ""
        return finding(ERROR, "rvs printed no result doctor can judge%s" % reason, details=details, remediation=ERROR_ADVICE)
    if errors:
        # An action that hit an error may print no verdict for the GPU it failed on: the passes are not the whole run.
        return finding(ERROR, "rvs printed %d error line(s) beside its passing results; first: %s%s"
                       % (len(errors), errors[0], "; rvs exited with rc %s" % rc if rc else ""), details=details,
                       remediation=ERROR_ADVICE)
    if rc:
        return finding(ERROR, "rvs exited with rc %s after passing results (RVS exits 0 when a test fails: a "
                              "configuration or launch error cut the run short)" % rc, details=details,
                       remediation=ERROR_ADVICE)
    actions = list(OrderedDict.fromkeys([r["action"] for r in results] + [r["action"] for r in summary]))
    gpus = sorted(set(str(r["gpu_id"]) for r in results if r.get("gpu_id") is not None) | set(known))
    return finding(PASS, "rvs: %d action%s passed%s" % (len(actions), "" if len(actions) == 1 else "s",
                                                        " on %d GPUs" % len(gpus) if gpus else ""), details=details)
