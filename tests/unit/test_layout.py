"""The layout rules of STRUCTURE.md, checked on the source: each folder of module_utils has one owner, data flows one
way (target -> controller, analysis -> renderer), status words come from _status.py, private names stay in their file."""

import ast
import glob
import os
import re

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils import _status
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
STATUS_MODULE = os.path.join(MODULE_UTILS, "_status.py")
COLLECTION = "ansible_collections.continuum.hydra"
PACKAGE = COLLECTION + ".plugins.module_utils"
SHARED = {"_results", "_status", "_expect", "_atomic"}  # flat files shared by design
FEATURES = {"_doctor", "_profile", "_workload", "_env_setup", "_remediate", "_fabric"}
TEST_PACKAGES = ("ansible_collections.continuum.hydra.tests.unit", "ansible_collections.continuum.hydra.tests.integration")
CONTROLLER = ("plugin_utils", "filter", "callback", "action")  # plugins/<these> run on the controller only
ROLE_FILES = sorted(glob.glob(os.path.join(REPO, "roles", "*", "files")))  # programs a role copies to the host
SOURCES = [os.path.join(REPO, "plugins")] + ROLE_FILES
# A worker runs as ``python -c SOURCE`` and imports nothing from the collection: it spells its answer's words out.
WORKER_MARK = "nothing from the collection: worker.py runs this file's source"
# Check statuses and host verdicts are never spelt out, not even as a key; the other words of _status.py may name a
# field too (a result's "error", the coverage's "never" list), so a dict key, a subscript, .get() or "w" in x is not
# their use as a status.
VERDICT_WORDS = set(_status.STATUSES) | {_status.HEALTHY, _status.WARNING, _status.FAILED, _status.UNREACHABLE}
# Where a word of _status.py is not a status: (file, word) -> why.
NOT_STATUSES = {
    ("plugins/plugin_utils/_render/junit.py", "error"): "JUnit XML's element name <error>",
    ("plugins/plugin_utils/_render/junit.py", "skipped"): "JUnit XML's element name <skipped>",
    ("plugins/plugin_utils/_render/_views.py", "never"): "the coverage section's never-screened list, a field",
    ("plugins/plugin_utils/_fleet/report.py", "skipped"): "Ansible's own flag in a task result, a field",
    ("plugins/plugin_utils/_fleet/interconnect.py", "missing"): "the name of a port's problem (a port gone missing)",
    ("plugins/plugin_utils/_fleet/interconnect.py", "unknown"): "the interconnect section's unknown-counter list, a field",
    ("plugins/module_utils/_host/slurm.py", "TIMEOUT"): "SLURM's job state TIMEOUT (squeue, scontrol), read from SLURM",
    ("plugins/module_utils/_host/gpus/amd_smi.py", "error"): "a word searched for in amd-smi's text for a value",
    ("plugins/module_utils/_host/gpus/amd_smi.py", "fail"): "a word searched for in amd-smi's text for a value",
    ("plugins/module_utils/_host/gpus/amd_smi.py", "unknown"): "a word searched for in amd-smi's text for a value",
    ("plugins/module_utils/_host/gpus/amd_sysfs.py", "unknown"): "the text sysfs gives for a value it does not know",
    ("plugins/module_utils/_host/gpus/nvidia_smi.py", "absent"): "the kind of a query field's value (absent, value, unreadable)",
    ("plugins/module_utils/_host/gpus/nvlink_errors.py", "error"): "a word searched for in an NVLink counter's name",
    ("plugins/module_utils/_doctor/checks/dcgm.py", "skipped"): "a word of a check's message",
    ("plugins/module_utils/_doctor/checks/stack.py", "error"): "the error field of torch's device record",
    ("plugins/module_utils/_doctor/checks/system.py", "unknown"): "the text shown for a size that could not be read",
    ("plugins/module_utils/_doctor/healthcheck.py", "unknown"): "the text of a drain reason for a check without an id",
    ("plugins/module_utils/_doctor/probes/dcgm.py", "pass"): "dcgmi's own result word, read from its JSON",
    ("plugins/module_utils/_doctor/probes/dcgm.py", "fail"): "dcgmi's own result word, read from its JSON",
    ("plugins/module_utils/_doctor/probes/dcgm.py", "warn"): "dcgmi's own result word, read from its JSON",
    ("plugins/module_utils/_doctor/probes/rvs.py", "error"): "a word searched for in rvs's log",
    ("plugins/module_utils/_fabric/rank.py", "missing"): "the fabric verdict's list of ranks that did not join, a field",
    ("plugins/module_utils/_fabric/rank.py", "incomplete"): "the reason given when no other is known",
    ("plugins/module_utils/_remediate/cgroups.py", "warn"): "cgroup_limits' severity option (how hard to limit)",
    ("plugins/module_utils/_remediate/cgroups.py", "fail"): "cgroup_limits' severity option (how hard to limit)",
    ("plugins/action/bug_report.py", "unknown"): "the host name used when none is known",
}


def python_files(top):
    for directory, _dirs, files in os.walk(top):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(directory, name)


def source_files():
    for top in SOURCES:
        yield from python_files(top)


def status_words():
    """The string values of _status.py's public constants: every outcome word."""
    with open(STATUS_MODULE) as handle:
        tree = ast.parse(handle.read(), STATUS_MODULE)
    return {node.value.value for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and all(isinstance(t, ast.Name) and not t.id.startswith("_") for t in node.targets)}


def _names_a_field(node, parent):
    """Whether a string constant is a key or an attribute name here, or looked for in something, not a value."""
    if isinstance(parent, ast.Dict):
        return any(key is node for key in parent.keys)
    if isinstance(parent, ast.Subscript):
        return parent.slice is node
    if isinstance(parent, ast.Compare):
        return parent.left is node and all(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops)
    if isinstance(parent, ast.Call) and parent.args:
        if isinstance(parent.func, ast.Attribute) and parent.func.attr in ("get", "pop", "setdefault"):
            return parent.args[0] is node
        if isinstance(parent.func, ast.Name) and parent.func.id in ("getattr", "hasattr", "setattr"):
            return len(parent.args) > 1 and parent.args[1] is node
    return False


def spelt_status_words(path, text, words):
    """[(line, word)] of the status words a source spells out in its code (documentation may name them)."""
    if WORKER_MARK in text:
        return []
    found = []
    pending = [(ast.parse(text, path), None)]
    while pending:  # one walk, each node with its parent
        node, parent = pending.pop()
        pending.extend((child, node) for child in ast.iter_child_nodes(node))
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words):
            continue
        documentation = isinstance(parent, ast.Expr) or (isinstance(parent, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("DOCUMENTATION", "EXAMPLES", "RETURN") for t in parent.targets))
        if not documentation and (node.value in VERDICT_WORDS or not _names_a_field(node, parent)):
            found.append((node.lineno, node.value))
    return sorted(found)


def private_names(path, text):
    """[(line, name)] of the private names (``_name``) a source takes from another of the collection's modules:
    ``from module import _name`` or ``module._name`` (a private module, ``from package import _host``, is a package's
    own business: the layout rules above say who may import it)."""
    tree = ast.parse(text, path)
    modules = {}  # local name -> dotted module it stands for
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(COLLECTION + "."):
            for alias in node.names:
                dotted = "%s.%s" % (node.module, alias.name)
                if _is_module(dotted):
                    modules[alias.asname or alias.name] = dotted
                elif alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append((node.lineno, dotted))
        elif isinstance(node, ast.Import):
            modules.update((alias.asname, alias.name) for alias in node.names if alias.asname and alias.name.startswith(COLLECTION + "."))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and node.attr.startswith("_") and not node.attr.startswith("__") and not _is_module("%s.%s" % (modules[node.value.id], node.attr)):
            found.append((node.lineno, "%s.%s" % (modules[node.value.id], node.attr)))
    return found


def _is_module(dotted):
    path = os.path.join(REPO, *dotted[len(COLLECTION) + 1:].split("."))
    return os.path.isdir(path) or os.path.isfile(path + ".py")


def imported_modules(path, text=None):
    if text is None:
        with open(path) as handle:
            text = handle.read()
    tree = ast.parse(text, path)
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
    words = status_words()
    found = []
    for path in source_files():
        if path == STATUS_MODULE:
            continue
        name = os.path.relpath(path, REPO)
        with open(path) as handle:
            found.extend("%s:%d %r" % (name, line, word) for line, word in spelt_status_words(path, handle.read(), words)
                         if (name, word) not in NOT_STATUSES)
    assert not found


def test_every_word_the_status_module_does_not_own_says_why_and_is_still_there():
    """An entry of NOT_STATUSES names a word of _status.py that its file still spells out (else it is stale)."""
    words = status_words()
    stale = []
    for name, word in NOT_STATUSES:
        path = os.path.join(REPO, name)
        with open(path) as handle:
            spelt = {w for _line, w in spelt_status_words(path, handle.read(), words)}
        if word not in words or word not in spelt:
            stale.append((name, word))
    assert not stale


@pytest.mark.parametrize("code, spelt", [
    ("status = 'warning'", [(1, "warning")]),  # a host verdict, spelt out
    ("if row['status'] == 'SUCCESS': pass", [(1, "SUCCESS")]),  # a workload run's outcome
    ("out = dict(status='ok')", [(1, "ok")]),  # what reading produced, as a keyword's value
    ("counts = {'PASS': 0}", [(1, "PASS")]),  # a check status is not even a key
    ("error = result.get('error') or result['error'] or ('error' in result)", []),  # a field named error
    ('"""A docstring may say PASS, FAIL and not_screened."""', []),
    ("RETURN = 'healthy'", []),  # module documentation
])
def test_the_status_word_rule_catches_a_word_spelt_out_in_code(code, spelt):
    assert spelt_status_words("planted.py", code, status_words()) == spelt


def test_a_worker_run_as_python_c_spells_its_words_out():
    planted = "# Standard library only, and %s as ``python -c``.\nprint({'status': 'ok'})\n" % WORKER_MARK
    assert spelt_status_words("planted.py", planted, status_words()) == []
    assert spelt_status_words("planted.py", planted.replace("nothing", "something"), status_words()) == [(2, "ok")]


def test_no_private_name_is_used_across_files():
    found = []
    for path in source_files():
        with open(path) as handle:
            found.extend("%s:%d %s" % (os.path.relpath(path, REPO), line, name) for line, name in private_names(path, handle.read()))
    assert not found


@pytest.mark.parametrize("code, taken", [
    ("from %s.plugins.module_utils._host.files import _read" % COLLECTION, [(1, COLLECTION + ".plugins.module_utils._host.files._read")]),
    ("from %s.plugins.module_utils._host import files\nfiles._read('x')" % COLLECTION,
     [(2, COLLECTION + ".plugins.module_utils._host.files._read")]),
    ("from %s.plugins.module_utils._host import files as _f\n_f._read('x')" % COLLECTION,
     [(2, COLLECTION + ".plugins.module_utils._host.files._read")]),
    ("from %s.plugins.module_utils import _status\nfrom %s.plugins.module_utils._host import files\nfiles.read_text('x')"
     % (COLLECTION, COLLECTION), []),  # private packages and modules, public names
])
def test_the_private_name_rule_catches_a_name_taken_from_another_module(code, taken):
    assert private_names("planted.py", code) == taken


# Data flows one way: the target side never imports the controller, an analysis never a renderer, and the library
# (plugin_utils) never the plugins that are its entry points. Layer of a file -> the layers it must not import.
CONTROLLER_LAYERS = {"plugin_utils", "plugin_utils._fleet", "plugin_utils._render", "filter", "callback", "action"}
ENTRY_POINTS = {"filter", "callback", "action"}
FORBIDDEN = {
    "module_utils": CONTROLLER_LAYERS, "modules": CONTROLLER_LAYERS, "role files": CONTROLLER_LAYERS,
    "plugin_utils._fleet": {"plugin_utils._render"} | ENTRY_POINTS,
    "plugin_utils._render": ENTRY_POINTS,
    "plugin_utils": ENTRY_POINTS,
}


def layer(dotted):
    """The layer of a dotted module name of the collection (None outside plugins)."""
    parts = dotted.split(".")
    if parts[:3] != COLLECTION.split(".") or len(parts) < 5 or parts[3] != "plugins":
        return None
    if parts[4] == "plugin_utils" and len(parts) > 5 and parts[5] in ("_fleet", "_render"):
        return "plugin_utils." + parts[5]
    return parts[4]


def layer_of_file(path):
    relative = os.path.relpath(path, REPO)
    if any(path.startswith(top + os.sep) for top in ROLE_FILES) or relative.split(os.sep)[:1] == ["roles"]:
        return "role files"
    return layer(".".join([COLLECTION] + relative[:-len(".py")].split(os.sep)))


def backward_imports(path, text):
    """The collection modules a file imports against the flow of data."""
    forbidden = FORBIDDEN.get(layer_of_file(path), set())
    return sorted({module for module in imported_modules(path, text) if layer(module) in forbidden})


def test_data_flows_one_way_target_to_controller_analysis_to_renderer():
    found = []
    for path in source_files():
        with open(path) as handle:
            found.extend("%s imports %s" % (os.path.relpath(path, REPO), module) for module in backward_imports(path, handle.read()))
    assert not found


@pytest.mark.parametrize("where, imported, backward", [
    ("plugins/plugin_utils/_fleet/planted.py", "plugin_utils._render.markdown", True),  # an analysis formatting
    ("plugins/plugin_utils/_render/planted.py", "plugin_utils._fleet.report", False),  # a renderer reads the analysis
    ("plugins/plugin_utils/_render/planted.py", "callback.fleet_report", True),
    ("plugins/module_utils/_doctor/planted.py", "plugin_utils._fleet.report", True),  # the target needs the controller
    ("plugins/modules/planted.py", "filter.doctor_outcomes", True),
    ("roles/planted/files/planted.py", "plugin_utils._fleet.report", True),
    ("roles/planted/files/planted.py", "module_utils._doctor.healthcheck", False),
    ("plugins/filter/planted.py", "plugin_utils._fleet.report", False),  # an entry point uses the library
])
def test_the_flow_rule_catches_an_import_against_the_flow(where, imported, backward):
    module = "%s.plugins.%s" % (COLLECTION, imported)
    found = backward_imports(os.path.join(REPO, where), "import %s\n" % module)
    assert found == ([module] if backward else [])


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
