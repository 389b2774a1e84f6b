# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""A MAD-layout model catalogue and madengine-compatible selection by tags.

The layout (ROCm/madengine ``utils/discover_models.py``): a root ``models.json`` (a JSON list of model objects),
and under ``scripts/`` each immediate subdirectory may hold a ``models.json`` or a ``get_models_json.py`` (never
both). Directory models are named ``<dir>/<name>``. A ``get_models_json.py`` defines ``list_models()`` returning
``CustomModel`` objects; it is loaded with ``madengine.utils.discover_models`` (and the older
``madengine.tools.discover_models``) importable as this module's ``CustomModel``, without madengine installed.

Selection reproduces madengine: each tag (comma lists flattened) is processed in order and the results are
concatenated with no de-duplication; ``selector:k=v:flag`` appends `` --k v --flag`` to the args; ``scope/name``
(one slash, no colon) limits to ``scope/`` models; a tag that matches nothing is an error. One deliberate
difference: a dynamic model selected twice is copied before its ``update_model()`` and path rewrite, so its
paths are not prefixed twice (madengine mutates the shared object).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import copy
import dataclasses
import importlib.util
import json
import os
import sys
import threading
import types
from collections.abc import Iterable, Sequence
from typing import Any, Optional

# madengine's default run limit (seconds) and its "use the default" CLI value.
DEFAULT_TIMEOUT = 7200
TIMEOUT_DEFAULT_MARKER = -1

_SHIM_NAMES = ("madengine", "madengine.utils", "madengine.utils.discover_models", "madengine.tools",
               "madengine.tools.discover_models")
_SHIM_LOCK = threading.Lock()


class CatalogueError(Exception):
    """The catalogue or a tag is unusable; the message is one line naming the bad value."""


@dataclasses.dataclass
class CustomModel:
    """madengine's model record for ``get_models_json.py`` files (same fields and defaults)."""

    name: str
    dockerfile: str = ""
    dockercontext: str = ""
    scripts: str = ""
    url: str = ""
    cred: str = ""
    owner: str = ""
    data: str = ""
    n_gpus: str = "-1"
    timeout: int = DEFAULT_TIMEOUT
    training_precision: str = ""
    tags: list = dataclasses.field(default_factory=list)
    args: str = ""
    multiple_results: str = ""
    skip_gpu_arch: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def update_model(self) -> None:
        """Subclasses fill fields lazily here; called when a tag selects the model."""


def split_tags(tags: Iterable[Any]) -> list[str]:
    """Flatten repeated and comma-separated tags into one ordered list (empty items dropped), as madengine's CLI."""
    flat: list[str] = []
    for tag in tags:
        flat.extend(part.strip() for part in str(tag).split(",") if part.strip())
    return flat


def _load_json_list(path: str) -> list:
    try:
        with open(path) as handle:
            data = json.load(handle)
    except OSError as exc:
        raise CatalogueError("%s: cannot read (%s)" % (path, exc.strerror or exc)) from None
    except ValueError as exc:
        raise CatalogueError("%s: not valid JSON (%s)" % (path, exc)) from None
    if not isinstance(data, list):
        raise CatalogueError("%s: must be a JSON list of model objects, not %s" % (path, _json_kind(data)))
    for number, entry in enumerate(data, 1):
        problem = _entry_problem(number, entry)
        if problem:
            raise CatalogueError("%s: %s" % (path, problem))
    return data


def _json_kind(value: Any) -> str:
    kinds = ((bool, "a boolean"), (str, "a string"), (dict, "an object"), (list, "a list"), ((int, float), "a number"))
    return next((word for kind, word in kinds if isinstance(value, kind)), "null")


def _entry_problem(number: int, entry: Any) -> Optional[str]:
    """Why one models.json entry cannot be used as madengine would use it (None when it can); names entry and field.

    Only fields that selection and a run read as text are checked; others (n_gpus, timeout, skip_gpu_arch...) are
    read loosely where they are used, as madengine does.
    """
    if not isinstance(entry, dict):
        return "entry %d is %s, not a model object" % (number, _json_kind(entry))
    if "name" not in entry:
        return "entry %d has no name (each model needs a string name)" % number
    name = entry["name"]
    if not isinstance(name, str) or not name.strip():
        return "entry %d: name %r is not a model name" % (number, name)
    for key in ("dockerfile", "scripts"):
        if key in entry and not isinstance(entry[key], str):
            return "model %s: %s %r is not a string path" % (name, key, entry[key])
    if "args" in entry and not isinstance(entry["args"], str):
        return "model %s: args %r is not a string (tag parameters are appended to it)" % (name, entry["args"])
    if entry.get("multiple_results") is not None and not isinstance(entry["multiple_results"], str):
        return "model %s: multiple_results %r is not a file name" % (name, entry["multiple_results"])
    tags = entry.get("tags", [])
    if not isinstance(tags, str) and not (isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)):
        return "model %s: tags %r is not a list of strings or a comma-separated string" % (name, tags)
    return None


def _shim_modules() -> dict[str, types.ModuleType]:
    modules = {name: types.ModuleType(name) for name in _SHIM_NAMES}
    links = [("madengine.utils.discover_models", "CustomModel", CustomModel),
             ("madengine.tools.discover_models", "CustomModel", CustomModel),
             ("madengine", "utils", modules["madengine.utils"]), ("madengine", "tools", modules["madengine.tools"]),
             ("madengine.utils", "discover_models", modules["madengine.utils.discover_models"]),
             ("madengine.tools", "discover_models", modules["madengine.tools.discover_models"])]
    for owner, attribute, value in links:
        setattr(modules[owner], attribute, value)
    for module in modules.values():
        module.__path__ = []  # a package, so submodule imports resolve
    return modules


def _load_dynamic(path: str, dirname: str) -> list[CustomModel]:
    """Import a get_models_json.py with the madengine import names provided, and call its list_models()."""
    spec = importlib.util.spec_from_file_location("get_models_json", path)
    if spec is None or spec.loader is None:
        raise CatalogueError("%s: cannot be loaded as a Python file" % path)
    module = importlib.util.module_from_spec(spec)
    with _SHIM_LOCK:
        saved = {name: sys.modules.get(name) for name in _SHIM_NAMES}
        sys.modules.update(_shim_modules())
        try:
            spec.loader.exec_module(module)
            if not hasattr(module, "list_models"):
                raise CatalogueError("%s: defines no list_models() function" % path)
            listed = module.list_models()
        except CatalogueError:
            raise
        except Exception as exc:  # pylint: disable=broad-exception-caught
            raise CatalogueError("%s: %s: %s" % (path, type(exc).__name__, " ".join(str(exc).split()))) from None
        finally:
            for name, previous in saved.items():
                if previous is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = previous
    if not isinstance(listed, (list, tuple)) and listed is not None:
        raise CatalogueError("%s: list_models() returned %s; a list of CustomModel objects is expected" % (path, type(listed).__name__))
    models = []
    for model in listed or []:
        if not isinstance(model, CustomModel):
            raise CatalogueError("%s: list_models() returned %r; use or subclass "
                                 "madengine.utils.discover_models.CustomModel" % (path, type(model).__name__))
        model.name = dirname + "/" + model.name
        models.append(model)
    return models


class Catalogue:
    """The models of one MAD-layout directory: static entries (root, then scripts/<dir>/models.json) and dynamic ones."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        root_json = os.path.join(self.root, "models.json")
        if not os.path.isfile(root_json):
            raise CatalogueError("catalogue %s: no models.json at its root (a MAD-layout directory needs one)" % root)
        self.models: list[dict] = [dict(entry) for entry in _load_json_list(root_json)]
        self.custom_models: list[CustomModel] = []
        scripts = os.path.join(self.root, "scripts")
        try:
            # madengine walks os.listdir() order (unsorted); the same call keeps the same order on the same filesystem.
            dirnames = os.listdir(scripts)
        except OSError as exc:
            raise CatalogueError("catalogue %s: cannot list scripts/ (%s)" % (root, exc.strerror or exc)) from None
        for dirname in dirnames:
            folder = os.path.join(scripts, dirname)
            if not os.path.isdir(folder):
                continue
            files = os.listdir(folder)
            if "models.json" in files and "get_models_json.py" in files:
                raise CatalogueError("%s: holds both models.json and get_models_json.py; keep one" % folder)
            if "models.json" in files:
                for entry in _load_json_list(os.path.join(folder, "models.json")):
                    entry = dict(entry)
                    entry["name"] = dirname + "/" + entry["name"]
                    entry["dockerfile"] = os.path.normpath(os.path.join("scripts", dirname, entry.get("dockerfile", "")))
                    entry["scripts"] = os.path.normpath(os.path.join("scripts", dirname, entry.get("scripts", "")))
                    self.models.append(entry)
            if "get_models_json.py" in files:
                self.custom_models.extend(_load_dynamic(os.path.join(folder, "get_models_json.py"), dirname))

    def names(self) -> list[str]:
        """Every model name, in madengine's discovery order."""
        return [model["name"] for model in self.models] + [model.name for model in self.custom_models]

    def select(self, tags: Sequence[Any]) -> list[dict]:
        """The models the tags select, in madengine's order, each a dict of the model's fields with args extended."""
        selected: list[dict] = []
        for tag in split_tags(tags):
            selected.extend(self._select_one(tag))
        return selected

    def _select_one(self, tag: str) -> list[dict]:
        parts = [part.strip() for part in tag.split(":") if part.strip()]
        if not parts:
            raise CatalogueError("tag %r names no model, tag or 'all' before its parameters" % tag)
        selector = parts[0]
        extra = "".join(" --" + part.replace("=", " ") for part in parts[1:])
        scope: Optional[tuple[str, str]] = None
        if tag.count("/") == 1 and ":" not in tag:
            scope_part, filter_part = tag.split("/", 1)
            if scope_part and filter_part:
                scope = (scope_part, filter_part)

        def matches(name: str, model_tags: Any) -> bool:
            if scope is not None:
                prefix = scope[0] + "/"
                return name.startswith(prefix) and (
                    scope[1] == "all" or has_tag(model_tags, scope[1]) or name == prefix + scope[1])
            return name == selector or has_tag(model_tags, selector) or selector == "all"

        found: list[dict] = []
        for model in self.models:
            if matches(model["name"], model.get("tags")):
                entry = dict(model)
                if "args" not in entry:
                    raise CatalogueError("model %s: has no args field (madengine needs one, \"\" for none)" % entry["name"])
                entry["args"] = str(entry["args"]) + extra
                found.append(entry)
        for custom in self.custom_models:
            if matches(custom.name, custom.tags):
                model_copy = copy.copy(custom)
                model_copy.tags = list(custom.tags)
                try:
                    model_copy.update_model()
                except Exception as exc:  # pylint: disable=broad-exception-caught
                    raise CatalogueError("model %s: update_model() failed: %s: %s" % (custom.name, type(exc).__name__, exc)) from None
                dirname = custom.name.split("/")[0]
                model_copy.dockerfile = os.path.normpath(os.path.join("scripts", dirname, model_copy.dockerfile))
                model_copy.scripts = os.path.normpath(os.path.join("scripts", dirname, model_copy.scripts))
                entry = model_copy.to_dict()
                entry["args"] = str(entry["args"]) + extra
                found.append(entry)
        if not found:
            raise CatalogueError("No models found corresponding to the given tag: %s" % tag)
        return found


def has_tag(tags: Any, value: str) -> bool:
    """Whether value is one of a model's tags (a list, or a comma-separated string)."""
    if isinstance(tags, list):
        return value in tags
    if isinstance(tags, str):
        return value in [part.strip() for part in tags.split(",") if part.strip()]
    return False


def resolve_timeout(requested: Optional[int], model_timeout: Any) -> Optional[int]:
    """The run limit in seconds, madengine's rules; None means no limit.

    ``requested`` -1 (or None) is the default, 7200 s; 0 is no limit; any other value wins. The model's
    ``timeout`` applies only when it is > 0 and the requested value is the default (an explicit 7200 counts as
    the default, as in madengine).
    """
    limit = DEFAULT_TIMEOUT if requested in (None, TIMEOUT_DEFAULT_MARKER) else requested
    if limit == 0:
        return None
    try:
        # A bool is not a number of seconds (true would be a 1 s limit); inf and NaN are no limit a run can keep.
        model_value = 0 if isinstance(model_timeout, bool) else int(model_timeout)
    except (TypeError, ValueError, OverflowError):
        model_value = 0
    if limit == DEFAULT_TIMEOUT and model_value > 0:
        return model_value
    return limit


def describe(entry: dict, requested_timeout: Optional[int]) -> dict:
    """What discover mode lists for a selected model: the fields a run uses, the timeout resolved."""
    return {
        "name": entry["name"],
        "args": entry.get("args", ""),
        "scripts": entry.get("scripts", ""),
        "dockerfile": entry.get("dockerfile") or "",
        "n_gpus": str(entry.get("n_gpus", "-1")),
        "timeout": resolve_timeout(requested_timeout, entry.get("timeout")),
        "tags": entry.get("tags") if isinstance(entry.get("tags"), list) else split_tags([entry.get("tags") or ""]),
        "multiple_results": entry.get("multiple_results") or "",
    }
