"""The layout rules of STRUCTURE.md, checked on the source: each folder of module_utils has one owner."""

import ast
import os
import re

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import REPO

MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
PACKAGE = "ansible_collections.continuum.hydra.plugins.module_utils"
SHARED = {"_results", "_status", "_expect", "_atomic"}  # flat files shared by design
FEATURES = {"_doctor", "_profile", "_workload", "_env_setup", "_remediate", "_fabric"}
TEST_PACKAGES = ("ansible_collections.continuum.hydra.tests.unit", "ansible_collections.continuum.hydra.tests.integration")
STATUS_WORDS = re.compile(r"""(["'])(PASS|WARN|FAIL|SKIP|ERROR|healthy|warning|failed|unreachable)\1""")


def python_files(top):
    for directory, _dirs, files in os.walk(top):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(directory, name)


def imported_modules(path):
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            for alias in node.names:
                yield "%s.%s" % (node.module, alias.name)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def owner(module):
    """The top folder (or shared file) of module_utils a dotted module name belongs to, else None."""
    if not module.startswith(PACKAGE + "."):
        return None
    return module[len(PACKAGE) + 1:].split(".")[0]


def test_module_utils_holds_feature_folders_the_host_layer_and_four_shared_files():
    entries = sorted(os.listdir(MODULE_UTILS))
    flat = sorted(name[:-3] for name in entries if name.endswith(".py") and name != "__init__.py")
    folders = sorted(name for name in entries if os.path.isdir(os.path.join(MODULE_UTILS, name)) and name != "__pycache__")
    assert set(flat) <= SHARED, flat
    assert set(folders) <= FEATURES | {"_host"}, folders


@pytest.mark.parametrize("feature", sorted(FEATURES | {"_host"}))
def test_a_feature_imports_only_itself_the_host_layer_and_the_shared_files(feature):
    allowed = {feature, "_host"} | SHARED
    crossings = []
    for path in python_files(os.path.join(MODULE_UTILS, feature)):
        for module in imported_modules(path):
            other = owner(module)
            if other is not None and other not in allowed:
                crossings.append("%s imports %s" % (os.path.relpath(path, REPO), module))
    assert not crossings


def test_status_words_are_spelt_out_only_in_the_status_module():
    found = []
    for path in python_files(os.path.join(REPO, "plugins")):
        if path.endswith(os.path.join("module_utils", "_status.py")):
            continue
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        # Module documentation (DOCUMENTATION, RETURN, docstrings) may name statuses; code may not.
        docs = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
        docs |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id in ("DOCUMENTATION", "EXAMPLES", "RETURN") for t in node.targets)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and STATUS_WORDS.fullmatch(repr(node.value)):
                found.append("%s:%d %r" % (os.path.relpath(path, REPO), node.lineno, node.value))
    assert not found


def test_no_test_or_benchmark_edits_sys_path():
    edits = []
    for top in ("tests", "benchmarks"):
        for path in python_files(os.path.join(REPO, top)):
            if os.path.join("tests", "output") in path:
                continue
            with open(path) as handle:
                if re.search(r"sys\.path\.(insert|append)\(", handle.read()):
                    edits.append(os.path.relpath(path, REPO))
    assert not edits


def test_tests_import_shared_helpers_from_tests_support_never_from_another_test_module():
    crossings = []
    for path in python_files(os.path.join(REPO, "tests")):
        if os.path.join("tests", "output") in path:
            continue
        for module in imported_modules(path):
            if any(module == package or module.startswith(package + ".") for package in TEST_PACKAGES):
                crossings.append("%s imports %s (helpers belong in tests/support)" % (os.path.relpath(path, REPO), module))
    assert not crossings
