"""Environment drift on generated fleets with planted anomalies: exactly the planted hosts are found."""

import json
import random

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.env_drift import (
    environment_drift,
    host_packages,
    majority_version,
)

GOOD_GPU = {"numpy": "2.1.3", "torch": "2.5.1+cu124", "typing_extensions": "4.12.2", "pip": "24.2"}
GOOD_CPU = {"numpy": "2.1.3", "torch": "2.13.0+cpu", "pip": "24.2"}


def as_result(packages):
    """What continuum.hydra.env_setup returns: the packages are in result['manifest']['packages']."""
    return {"changed": False, "manifest": {"kind": "continuum.hydra.env_manifest",
                                           "packages": [{"name": n, "version": v} for n, v in sorted(packages.items())]}}


def fleet():
    envs, classes = {}, {}
    for number in range(1, 9):
        host = "a100-%02d" % number
        envs[host], classes[host] = as_result(GOOD_GPU), "a100"
    for number in range(1, 5):
        host = "cpu-%02d" % number
        envs[host], classes[host] = as_result(GOOD_CPU), "cpu"
    # Planted: an old numpy, a missing torch, an extra package, and one spelling of a name pip normalises.
    envs["a100-03"] = as_result(dict(GOOD_GPU, numpy="2.0.2"))
    envs["a100-06"] = as_result(dict((k, v) for k, v in GOOD_GPU.items() if k != "torch"))
    envs["cpu-02"] = as_result(dict(GOOD_CPU, six="1.17.0"))
    envs["a100-07"] = as_result(dict((("Typing-Extensions" if k == "typing_extensions" else k), v) for k, v in GOOD_GPU.items()))
    envs["a100-08"] = {"changed": False, "manifest": None}  # env_setup failed before the manifest
    return envs, classes


def test_exactly_the_planted_hosts_drift():
    envs, classes = fleet()
    report = environment_drift(envs, classes)
    assert report["no_manifest"] == ["a100-08"]
    assert report["drift"] == [
        {"class": "a100", "host": "a100-03", "package": "numpy", "version": "2.0.2", "majority": "2.1.3"},
        {"class": "a100", "host": "a100-06", "package": "torch", "version": None, "majority": "2.5.1+cu124"},
        {"class": "cpu", "host": "cpu-02", "package": "six", "version": "1.17.0", "majority": None},
    ]
    a100 = report["classes"]["a100"]
    assert a100["hosts"] == ["a100-%02d" % n for n in range(1, 8)]
    assert a100["hosts_with_drift"] == ["a100-03", "a100-06"]
    assert a100["majority"] == {"numpy": "2.1.3", "pip": "24.2", "torch": "2.5.1+cu124", "typing-extensions": "4.12.2"}
    assert report["classes"]["cpu"]["majority"]["six"] is None


def test_classes_keep_their_own_majority():
    envs, classes = fleet()
    # Without classes the CPU hosts' torch is a minority build of the whole fleet: 4 hosts drift.
    flat = environment_drift(envs)
    torch_drift = [d["host"] for d in flat["drift"] if d["package"] == "torch"]
    assert torch_drift == ["a100-06", "cpu-01", "cpu-02", "cpu-03", "cpu-04"]
    assert list(flat["classes"]) == ["all"]
    classes.pop("cpu-04")
    assert environment_drift(envs, classes, default_class="unclassified")["classes"]["unclassified"]["hosts"] == ["cpu-04"]


def test_output_does_not_depend_on_input_order():
    envs, classes = fleet()
    expected = json.dumps(environment_drift(envs, classes))
    items = list(envs.items())
    for seed in range(5):
        random.Random(seed).shuffle(items)
        assert json.dumps(environment_drift(dict(items), classes)) == expected


def test_ignored_packages_are_left_out():
    envs, classes = fleet()
    envs["a100-01"] = as_result(dict(GOOD_GPU, pip="23.2.1"))
    assert [d["host"] for d in environment_drift(envs, classes)["drift"] if d["package"] == "pip"] == ["a100-01"]
    report = environment_drift(envs, classes, ignore=["PIP"])
    assert "pip" not in report["classes"]["a100"]["majority"]
    assert all(d["package"] != "pip" for d in report["drift"])


def test_manifests_and_plain_mappings_are_accepted():
    manifest = as_result(GOOD_CPU)["manifest"]
    assert host_packages(manifest) == host_packages(as_result(GOOD_CPU)) == host_packages(GOOD_CPU)
    assert host_packages({"packages": GOOD_CPU}) == {"numpy": "2.1.3", "torch": "2.13.0+cpu", "pip": "24.2"}
    assert host_packages(None) is None and host_packages({"failed": True, "msg": "x"}) is None
    assert host_packages({"packages": [{"name": "x"}]}) is None
    assert host_packages({"packages": []}) == {}


def test_ties_go_to_an_installed_version_then_the_highest():
    assert majority_version(["2.9.0", "2.10.0"]) == "2.10.0"
    assert majority_version([None, "1.0"]) == "1.0"
    assert majority_version(["1.0", "1.0", "2.0"]) == "1.0"
    assert majority_version([None, None, "1.0"]) is None
