# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Configuration drift: hosts whose configuration differs from their class's majority (pure).

No golden file is needed: within each class, the value more than half of the hosts that report a
field share is the reference, and every host with another value drifts. A field without such a
majority (two hosts, two values) is a "split": reported, no host blamed. An expected-versions file
pins golden values instead, for every class or per class.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Mapping
from typing import Any, Optional

import yaml

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.facts import DRIFT_FIELDS, GPU_FIELD_SOURCES, MODE_FIELDS, text

MAJORITY = "majority"
EXPECTED = "expected"


class ExpectedVersionsError(ValueError):
    """A bad expected-versions file: one line naming the bad value and what is accepted."""


def _accepted(where: str, field: str, value: object) -> list[str]:
    values = value if isinstance(value, list) else [value]
    out = []
    for item in values:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise ExpectedVersionsError("%s: %r is not a version string or number (or a list of them)" % (where, item))
        item_text = text(item) or ""  # never None: item is a string or a number
        out.append(item_text.lower() if field in MODE_FIELDS else item_text)
    if not out:
        raise ExpectedVersionsError("%s: an empty list accepts nothing; give at least one value" % where)
    return out


def _fields(where: str, mapping: object) -> dict[str, list[str]]:
    if not isinstance(mapping, dict):
        raise ExpectedVersionsError("%s: expected a mapping of field to value, got %s" % (where, type(mapping).__name__))
    out = {}
    for field, value in mapping.items():
        if field not in DRIFT_FIELDS:
            raise ExpectedVersionsError("%s: unknown field %r; accepted: %s" % (where, field, ", ".join(DRIFT_FIELDS)))
        out[field] = _accepted("%s.%s" % (where, field), field, value)
    return out


def parse_expected(content: str, source: str = "expected versions") -> dict[str, Any]:
    """{"all": {field: [accepted]}, "classes": {class: {field: [accepted]}}} from YAML or JSON text."""
    try:
        data = yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise ExpectedVersionsError("%s: not valid YAML/JSON: %s" % (source, " ".join(str(exc).split()))) from exc
    if data is None:
        return {"all": {}, "classes": {}}
    if not isinstance(data, dict):
        raise ExpectedVersionsError("%s: expected a mapping at the top, got %s" % (source, type(data).__name__))
    data = dict(data)
    classes = data.pop("classes", None) or {}
    if not isinstance(classes, dict):
        raise ExpectedVersionsError("%s: classes: expected a mapping of class name to fields, got %s" % (source, type(classes).__name__))
    return {"all": _fields(source, data),
            "classes": dict((str(name), _fields("%s: classes.%s" % (source, name), fields)) for name, fields in classes.items())}


def _majority(values: list[str]) -> tuple[Optional[str], dict[str, int]]:
    """(value, counts) where value is held by more than half of the values, else (None, counts)."""
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    best = max(sorted(counts), key=lambda v: counts[v])
    return (best if counts[best] * 2 > len(values) else None), counts


def _odd_gpus(facts: Mapping[str, Any], field: str, accepted: Iterable[str]) -> list[dict[str, Any]]:
    if field not in GPU_FIELD_SOURCES:
        return []
    return [{"index": index, "uuid": uuid, "value": value}
            for (index, uuid), value in zip(facts["gpu_ids"], facts["gpu_values"].get(field, ())) if value is not None and value not in accepted]


def analyse_drift(facts_by_host: Mapping[str, Any], host_class: Mapping[str, Optional[str]], count_peers: Mapping[str, str],
                  expected: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """Drift items, hosts with drift, per-class majorities and splits. Hosts without facts are left out."""
    expected = expected or {"all": {}, "classes": {}}
    groups: dict[tuple[str, str], list[str]] = {}  # (group key, field) -> [host]
    for host in sorted(host_class):
        name = host_class[host]
        facts = facts_by_host.get(host)
        if name is None or facts is None:
            continue
        for field in DRIFT_FIELDS:
            if facts.get(field) is None:
                continue
            key = count_peers[host] if field == "gpu_count" else "class:" + name
            groups.setdefault((key, field), []).append(host)

    items: list[dict[str, Any]] = []
    splits: list[dict[str, Any]] = []
    majorities: dict[str, dict[str, Optional[str]]] = {}
    for (key, field), hosts in sorted(groups.items()):
        values = [text(facts_by_host[h][field]) or "" for h in hosts]  # never None: hosts without the field are not grouped
        reference, counts = _majority(values)
        if key.startswith("class:"):
            majorities.setdefault(key[len("class:"):], {})[field] = reference
        for host, value in zip(hosts, values):
            pins = expected["classes"].get(host_class[host], {}).get(field) or expected["all"].get(field)
            if pins:
                if value not in pins:
                    items.append(_item(host, host_class[host], field, value, " or ".join(pins), EXPECTED,
                                       _odd_gpus(facts_by_host[host], field, pins)))
            elif reference is not None and value != reference:
                items.append(_item(host, host_class[host], field, value, reference, MAJORITY,
                                   _odd_gpus(facts_by_host[host], field, [reference])))
        if reference is None and not any(expected["classes"].get(host_class[h], {}).get(field) or expected["all"].get(field)
                                         for h in hosts[:1]):
            splits.append({"group": key.split(":", 1)[1], "field": field, "values": counts})
    items.sort(key=lambda i: (i["host"], DRIFT_FIELDS.index(i["field"])))
    by_field: dict[str, int] = {}
    for item in items:
        by_field[item["field"]] = by_field.get(item["field"], 0) + 1
    return {
        "fields": list(DRIFT_FIELDS),
        "items": items,
        "hosts": sorted(set(i["host"] for i in items)),
        "by_field": dict((f, by_field[f]) for f in DRIFT_FIELDS if f in by_field),
        "majority": majorities,
        "splits": splits,
        "pinned": sorted(set(expected["all"]) | set(f for c in expected["classes"].values() for f in c)),
    }


def _item(host: str, class_name: Optional[str], field: str, value: Optional[str], reference: str, basis: str,
          gpus: list[dict[str, Any]]) -> dict[str, Any]:
    return {"host": host, "class": class_name, "field": field, "value": value, "reference": reference, "basis": basis,
            "gpus": gpus}
