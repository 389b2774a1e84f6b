"""The hydra_expect table: every key declared once, typed, with a default of its kind; validation names the bad value."""

import ast
import os
import re

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import gpu as gpu_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system as system_probes
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

KEY_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def test_every_key_has_a_kind_a_default_of_that_kind_a_meaning_and_a_reader():
    assert len(_expect.KEYS) == len(_expect.table()) == len(set(entry.name for entry in _expect.KEYS))
    for entry in _expect.KEYS:
        assert KEY_NAME.match(entry.name), entry.name
        assert entry.kind in _expect.KINDS, entry
        assert entry.default is None or _expect.is_kind(entry.default, entry.kind), entry
        assert entry.meaning and "\n" not in entry.meaning, entry
        assert entry.read_by in _expect.READERS, entry


def test_profile_keys_say_so_in_their_meaning_and_doctor_keys_do_not():
    for entry in _expect.KEYS:
        assert entry.meaning.startswith("profile: ") == (entry.read_by == _expect.PROFILE), entry


def test_table_is_a_copy():
    _expect.table()["disk_paths"]["default"].append("/scratch")
    assert _expect.table()["disk_paths"]["default"] == ["/", "/tmp"]


def test_get_gives_the_value_or_the_declared_default():
    assert _expect.get({}, "xid_window_hours") == 24
    assert _expect.get(None, "gpu_count") is None
    assert _expect.get({"xid_window_hours": 72}, "xid_window_hours") == 72
    assert _expect.get({"xid_window_hours": None}, "xid_window_hours") == 24
    assert _expect.get({"torch_required": False}, "torch_required") is False
    assert _expect.get({"dev_shm_min_gb": 0}, "dev_shm_min_gb") == 0
    paths = _expect.get({}, "disk_paths")
    paths.append("/scratch")
    assert _expect.get({}, "disk_paths") == ["/", "/tmp"]


def test_an_undeclared_key_is_a_key_error():
    with pytest.raises(KeyError):
        _expect.get({}, "gpu_cuont")
    with pytest.raises(KeyError):
        _expect.key("gpu_cuont")
    with pytest.raises(KeyError):
        _expect.given({}, "gpu_cuont")
    assert _expect.key("gpu_count") == "gpu_count"


def test_given_ignores_defaults():
    assert not _expect.given({}, "disk_paths")
    assert not _expect.given({"disk_paths": None}, "disk_paths")
    assert _expect.given({"disk_paths": ["/"]}, "disk_paths")


def test_a_valid_dict_has_no_problems():
    assert _expect.problems(None) == []
    assert _expect.problems({}) == []
    assert _expect.problems({"gpu_count": 8, "dev_shm_min_gb": 1.5, "temperature_warn_c": 85, "torch_required": True,
                             "disk_paths": ["/"], "gpu_model": "H100", "gpu_bf16_tflops_min": None}) == []


def test_an_unknown_key_gives_one_message_naming_it_and_the_accepted_keys():
    found = _expect.problems({"gpu_cuont": 8})
    assert len(found) == 1
    head, accepted = found[0].split("; accepted: ")
    assert head == "expect: unknown key 'gpu_cuont'"
    assert accepted.split(", ") == sorted(_expect.table())


@pytest.mark.parametrize("key, value, message", [
    ("gpu_count", "8", "expect.gpu_count: '8' is not a int"),
    ("gpu_count", True, "expect.gpu_count: True is not a int"),
    ("gpu_count", 8.0, "expect.gpu_count: 8.0 is not a int"),
    ("dev_shm_min_gb", False, "expect.dev_shm_min_gb: False is not a number"),
    ("torch_required", 1, "expect.torch_required: 1 is not a bool"),
    ("gpu_model", 100, "expect.gpu_model: 100 is not a str"),
    ("disk_paths", "/", "expect.disk_paths: '/' is not a list"),
])
def test_a_wrongly_typed_value_gives_one_message_naming_the_value(key, value, message):
    assert _expect.problems({key: value}) == [message]


def test_problems_come_in_key_order():
    assert _expect.problems({"pcie_gen": "5", "ecc_mode": 1}) == [
        "expect.ecc_mode: 1 is not a str", "expect.pcie_gen: '5' is not a int"]


def test_the_probe_defaults_are_the_table_defaults():
    assert _expect.get({}, "xid_window_hours") == gpu_probes.XID_WINDOW_HOURS
    assert _expect.get({}, "disk_paths") == system_probes.DEFAULT_DISK_PATHS


def _read_keys(path):
    """hydra_expect keys a source file reads: the arguments of _expect.key(...) and _expect.get(..., "literal")."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "_expect" and node.func.attr in ("key", "get", "given"):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield arg.value


def test_every_key_is_read_by_the_feature_the_table_names():
    module_utils = os.path.join(REPO, "plugins", "module_utils")
    readers = {}
    for feature in ("_doctor", "_profile"):
        for directory, _dirs, files in os.walk(os.path.join(module_utils, feature)):
            for name in files:
                if name.endswith(".py"):
                    for key in _read_keys(os.path.join(directory, name)):
                        readers.setdefault(key, set()).add(feature.lstrip("_"))
    for key in _read_keys(os.path.join(REPO, "plugins", "plugin_utils", "_fleet", "fabric.py")):  # the controller's planner
        readers.setdefault(key, set()).add(_expect.FABRIC)
    for entry in _expect.KEYS:
        want = {_expect.DOCTOR, _expect.PROFILE} if entry.read_by == _expect.BOTH else {entry.read_by}
        assert readers.get(entry.name) == want, entry.name
