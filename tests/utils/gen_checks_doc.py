"""Write docs/checks.md from the check registry: the catalogue has one source, the code.

Usage: `make docs` (PYTHONPATH=collections python tests/utils/gen_checks_doc.py > docs/checks.md).
tests/unit/test_docs.py fails when docs/checks.md is out of date.
"""

import sys

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE, PROBE_ROOTS
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Check


def source(chk: Check) -> str:
    """The file that defines a check, linked from docs/: the id's file in one hop."""
    path = "plugins/module_utils/%s.py" % chk.func.__module__.split(".module_utils.", 1)[1].replace(".", "/")
    return "[`%s`](../%s)" % (path.rsplit("/", 1)[1], path)


def render() -> str:
    lines = [
        "# doctor check catalogue",
        "",
        "Generated from the check functions by `make docs`; do not edit by hand.",
        "Statuses: PASS, WARN, FAIL, SKIP (cannot apply here, with the reason), ERROR",
        "(a probe it needs failed or timed out). Per-GPU findings are in",
        "`details.gpus`, each naming `index`, `pci_bus_id` and `uuid`.",
        "",
        "Root causes: when a probe fails and its root check (below) is selected, that check alone is",
        "ERROR with the reason; the other checks reading the probe are SKIP with `blocked_by` naming the",
        "root. When the root check is not selected (`only` / `exclude`), they stay ERROR: a failed probe",
        "never makes a host look healthy. A probe without a root makes each of its checks ERROR.",
        "",
        "| probe | root check |",
        "| --- | --- |",
    ]
    lines += ["| `%s` | [`%s`](#%s) |" % (probe, root, root.replace(".", "")) for probe, root in PROBE_ROOTS.items()]
    lines += [
        "",
        "Levels (`level:` option, see levels.md): a run at a level runs the checks at or below it: `quick` (prolog-safe,",
        "one nvidia-smi call, no GPU load), `standard` (the default: adds the kernel log, NVML, PyTorch...), `deep`",
        "(adds active checks that load the GPUs). A check's level is the highest level of the probes it reads.",
        "",
        "| id | title | level | reads | source |",
        "| --- | --- | --- | --- | --- |",
    ]
    for chk in CATALOGUE:
        lines.append("| [`%s`](#%s) | %s | %s | %s | %s |" % (chk.id, chk.id.replace(".", ""), chk.title, chk.level, ", ".join(chk.probes),
                                                              source(chk)))
    for chk in CATALOGUE:
        lines += ["", "## %s" % chk.id, "", "**%s** — level `%s`; reads: %s." % (
            chk.title, chk.level, ", ".join("`%s`" % p for p in chk.probes) or "nothing"), ""]
        lines.append(chk.rule or "(no rule written)")
    lines += ["", "## Expectations (`hydra_expect`)", "",
              "The keys doctor reads, from the one table in `plugins/module_utils/_expect.py` (which also declares profile's).", "",
              "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, spec in sorted(_expect.table().items()):
        if spec["read_by"] not in (_expect.DOCTOR, _expect.BOTH):
            continue
        default = "" if spec["default"] is None else "`%s`" % (spec["default"],)
        lines.append("| `%s` | %s | %s | %s |" % (key, spec["kind"], default, spec["meaning"]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
