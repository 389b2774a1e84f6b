"""Fuzzing the nvidia-smi reader and the GPU checks with mutated copies of the recordings: element text replaced by
garbage, huge numbers or error strings, elements deleted, the file truncated. Seeded and bounded, so it is fast and
repeatable: never a traceback, never "check crashed", the JSON is RFC 8259 JSON, garbage is never all-PASS."""

import json
import random
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.per_gpu import GPU_PROBES
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import NvidiaSmiParseError, parse_nvidia_smi
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.nvidia import GPU_CHECKS, RECORDINGS

SMI_CHECKS = [c for c in GPU_CHECKS if c.probes in (("nvidia_smi",), GPU_PROBES)]
CASES = 300
JUNK = ("Unknown Error", "[Unknown Error]", "GPU is lost", "[GPU requires reset]", "Insufficient Permissions", "ERR!",
        "[Not Found]", "N/A", "[N/A]", "Not Supported", "", "   ", "inf", "-inf", "nan", "NaN W", "1e999", "-1e999",
        "9" * 5000, "-" + "9" * 400, "18446744073709551617", "0x1F", "Active", "Yes", "None", "Reset", "VGPU",
        "\u00e9\u00e8 \u2603", "<>&", "12 34 56", "-0", "0 C", "4294967295 MiB", "1.5.6 W")


def garbage(rng):
    if rng.random() < 0.7:
        return rng.choice(JUNK)
    return "".join(rng.choice("abcXYZ019 .-+%[]!/") for _unused in range(rng.randint(1, 24)))


def evaluate(data):
    probes = {"nvidia_smi": {"status": "ok", "data": data, "reason": None, "duration_ms": 0.0},
              "amd_smi": {"status": "absent", "data": None, "reason": "no AMD GPU", "duration_ms": 0.0}}
    records = [registry.evaluate(c, probes, {}) for c in SMI_CHECKS]
    for record in records:
        assert not record["message"].startswith("check crashed"), (record["id"], record["message"])
        json.dumps(record, allow_nan=False)
    return records


def mutate(rng, text):
    if rng.random() < 0.08:
        return text[: rng.randint(0, len(text))]  # truncated output
    root = ET.fromstring(text)
    nodes = [node for node in root.iter() if node is not root]
    for _unused in range(rng.randint(1, 12)):
        node = rng.choice(nodes)
        if rng.random() < 0.15:
            for parent in root.iter():
                if node in list(parent):
                    parent.remove(node)
                    break
            nodes = [n for n in root.iter() if n is not root]
        else:
            node.text = garbage(rng)
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("seed", range(CASES // 30))
def test_mutated_recordings_never_crash_and_stay_json(seed):
    rng = random.Random(seed)
    for _unused in range(30):
        text = mutate(rng, read_fixture("nvidia-smi", rng.choice(RECORDINGS)))
        try:
            data = parse_nvidia_smi(text)
        except NvidiaSmiParseError:
            continue  # the probe turns this into an ERROR of every nvidia-smi check
        json.dumps(data, allow_nan=False)
        evaluate(data)


@pytest.mark.parametrize("name", RECORDINGS)
@pytest.mark.parametrize("seed", range(3))
def test_a_gpu_whose_values_are_all_garbage_is_never_all_pass(name, seed):
    rng = random.Random(seed)
    root = ET.fromstring(read_fixture("nvidia-smi", name))
    gpu = root.find("gpu")
    for node in gpu.iter():
        if len(node) == 0 and (node.text or "").strip():
            node.text = rng.choice([j for j in JUNK if j not in ("N/A", "[N/A]", "Not Supported", "", "   ")]
                                   ) if rng.random() < 0.5 else garbage(rng) or "junk"
    data = parse_nvidia_smi(ET.tostring(root, encoding="unicode"))
    assert data["gpus"][0]["unreadable"], "garbage is recorded as unreadable"
    statuses = [r["status"] for r in evaluate(data)]
    assert set(statuses) != {"PASS"} and any(s in ("ERROR", "FAIL") for s in statuses), statuses
