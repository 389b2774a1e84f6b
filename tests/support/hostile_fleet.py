"""A fleet whose strings try to break every format: markup, quotes, ampersands, line breaks, control and
non-ASCII characters in host names, GPU names, check messages and remediations."""

import json
import os

from ansible_collections.continuum.hydra.plugins.module_utils._results import gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.tests.support.fleet_factory import REPO, SyntheticFleet, check

HOSTILE_HOSTS = [
    '<script>alert("x")</script>',
    "amp&co \"quoted\" 'single'",
    "line\nbreak\r\nhost",
    "pipe|star*_under_`tick`",
    "back\\slash\\n",
    "bell\x07-\x1b[31m-ctrl",
    "unicode-\u00fc-\u4e2d-\U0001F680",
    "</td></tr><tr><td>row",
]
HOSTILE_GPU_NAME = 'NVIDIA <b>A10G</b> & "co"'
HOSTILE_MESSAGE = "1 GPU with <uncorrectable> ECC & \"more\"\nsecond line\t</failure>]]>"
STRAGGLER = HOSTILE_HOSTS[0]
DRIFTER = HOSTILE_HOSTS[1]
FAILING = HOSTILE_HOSTS[2]
UNREACHABLE = "gone<&>\"'"


def hostile_report():
    """(report, names): an analysed report of 8 hostile A10G hosts plus an unreachable hostile one."""
    fleet = SyntheticFleet({"a10gx4": len(HOSTILE_HOSTS)}, seed=11, cv=0.01)
    renamed = {}
    for old, new in zip(fleet.names("a10gx4"), HOSTILE_HOSTS):
        renamed[new] = fleet.hosts.pop(old)
    fleet.hosts = renamed
    for record in fleet.hosts.values():
        for gpu in record["doctor"]["environment"]["gpus"]:
            gpu["name"] = HOSTILE_GPU_NAME
        for gpu in record["profile"]["gpus"]:
            gpu["name"] = HOSTILE_GPU_NAME
    fleet.slow_host(STRAGGLER, 0.7, "triad_gbps")
    fleet.set_env(DRIFTER, "driver_version", '999.<b>"1"</b>&')
    failing = fleet.hosts[FAILING]["doctor"]
    gpu = failing["environment"]["gpus"][1]
    ecc = check("gpu.ecc_errors", FAIL, gpus=[gpu_ref(gpu)], remediation="drain <node> & reset \"now\"")
    ecc["message"] = HOSTILE_MESSAGE
    persistence = check("gpu.persistence_mode", WARN, remediation="nvidia-smi -pm 1 | tee <log>")
    failing["checks"] = [ecc, persistence] + [c for c in failing["checks"] if c["id"] not in (ecc["id"], persistence["id"])]
    collector = fleet.collector()
    collector.add_unreachable(UNREACHABLE, "ssh: connect to host <gone> port 22: Connection refused\nretry & fail")
    report = collector.build("2026-11-22T13:00:00+00:00", "doctor<&>.yml")
    analyse(report, AnalysisOptions(history=[], batch={"global_batch_size": 256, "metric": "bf16_tflops"}))
    return report


def schema_validator():
    """A jsonschema validator for schemas/fleet-report.schema.json (with batch-plan.schema.json resolvable)."""
    import jsonschema
    from referencing import Registry, Resource

    schemas = {}
    for name in ("fleet-report.schema.json", "batch-plan.schema.json"):
        with open(os.path.join(REPO, "schemas", name)) as handle:
            schemas[name] = json.load(handle)
    registry = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in schemas.values()])
    return jsonschema.Draft202012Validator(schemas["fleet-report.schema.json"], registry=registry,
                                           format_checker=jsonschema.FormatChecker())
