# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The batch plan's files (batch-plan.json, batch-plan.yaml), written in pieces.

A plan names every host and GPU of the fleet: at 100,000 hosts its YAML, built in one ``yaml.safe_dump``, holds a
node object for every key and value at once (about 12 KB a host) and takes minutes with PyYAML's Python emitter.
yaml_text() gives the same text one host at a time, each host's entry with libyaml's emitter (five times faster)
when PyYAML has it and the entry's strings are plain (letters, digits, ``._:/+()-`` and inner spaces, shorter
than 100): the two emitters differ on a few odd keys (an empty one, one of 128 bytes: libyaml counts bytes), so any
other entry goes through PyYAML's own emitter. tests/unit/plugins/plugin_utils/_render/test_batch_plan.py compares
the text with ``yaml.safe_dump``'s.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.state_files import json_text

# The plan's mappings with an entry per host: written entry by entry.
PER_HOST = ("excluded_hosts", "hosts")
FAST_DUMPER = getattr(yaml, "CSafeDumper", None)
_PLAIN = re.compile(r"[A-Za-z0-9._:/+()-]([A-Za-z0-9 ._:/+()-]{0,97}[A-Za-z0-9._:/+()-])?\Z")


def _plain(value: Any) -> bool:
    """Whether every string of the value is one both emitters write alike (the module docstring)."""
    if isinstance(value, str):
        return bool(_PLAIN.match(value))
    if isinstance(value, Mapping):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return True  # numbers, booleans, None: PyYAML's representer writes them for both emitters


def _dump(value: Any, fast: Any = None) -> str:
    dumper = fast if fast is not None and _plain(value) else yaml.SafeDumper
    return str(yaml.dump(value, Dumper=dumper, sort_keys=True, default_flow_style=False))


def yaml_text(plan: Mapping[str, Any], fast: Any = FAST_DUMPER) -> Iterator[str]:
    """``yaml.safe_dump(plan, sort_keys=True, default_flow_style=False)`` in pieces: each per-host mapping entry by
    entry, dumped under its own key so that it sits at the same indentation (and wraps at the same columns).
    ``fast``: libyaml's dumper (None: PyYAML's emitter for everything)."""
    for key in sorted(plan):
        value = plan[key]
        if key not in PER_HOST or not isinstance(value, Mapping) or not value:
            yield _dump({key: value})
            continue
        yield _dump({key: None}).replace(" null\n", "\n", 1)
        for name in sorted(value):
            text = _dump({key: {name: value[name]}}, fast)
            yield text[text.index("\n") + 1:]


def json_pieces(plan: Mapping[str, Any]) -> Iterator[str]:
    """``json.dumps(plan, indent=1, sort_keys=True) + "\\n"``, in pieces."""
    return json_text(plan)
