# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The check registry: every doctor check is a pure function of probe data.

A check is declared with @check(id, title, requires=..., uses=...). The
function receives ``probes`` (probe name -> envelope, see _doctor.probes.catalogue)
and ``expect`` (the host's hydra_expect dict) and returns
_results.finding(...). Its docstring is the rule shown in docs/checks.md:
first line what it reads, the rest the PASS/WARN/FAIL rule.

Probes named in ``requires`` gate the check: a probe that errored makes the
check ERROR with the probe's reason, an absent one makes it SKIP. Probes in
``uses`` are handed over as envelopes whatever their status, for checks that
judge absence themselves (an expected GPU that nvidia-smi cannot see is a FAIL).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import inspect
import time

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, SKIP, STATUSES

_REGISTRY = []
_EXPECTATIONS = {}

# Accepted Python types per declared kind of expectation value.
_KINDS = {"int": (int,), "number": (int, float), "str": (str,), "bool": (bool,), "list": (list,)}


class Check:
    def __init__(self, check_id, title, func, requires, uses):
        self.id = check_id
        self.title = title
        self.category = check_id.split(".", 1)[0]
        self.func = func
        self.requires = tuple(requires)
        self.uses = tuple(uses)
        self.rule = inspect.cleandoc(func.__doc__ or "")

    @property
    def probes(self):
        return self.requires + tuple(p for p in self.uses if p not in self.requires)

    def describe(self):
        return {"id": self.id, "title": self.title, "category": self.category, "reads": list(self.probes), "rule": self.rule}


def check(check_id, title, requires=(), uses=()):
    """Register a check function under a stable dotted id."""
    def register(func):
        if any(c.id == check_id for c in _REGISTRY):
            raise ValueError("duplicate check id %s" % check_id)
        _REGISTRY.append(Check(check_id, title, func, requires, uses))
        return func
    return register


def registered():
    return list(_REGISTRY)


def expectation(key, kind, meaning, default=None):
    """Declare a hydra_expect key a check reads, so typos and wrong types are caught up front."""
    if kind not in _KINDS:
        raise ValueError("unknown expectation kind %r" % kind)
    _EXPECTATIONS[key] = {"kind": kind, "meaning": meaning, "default": default}
    return key


def expectations():
    return dict(_EXPECTATIONS)


def expected(expect, key):
    """The host's expectation for key, or the declared default."""
    value = expect.get(key)
    return _EXPECTATIONS[key]["default"] if value is None else value


def invalid_expectations(expect):
    """One message per unknown key or wrongly typed value in an expect dict."""
    problems = []
    for key in sorted(expect or {}):
        value = expect[key]
        if key not in _EXPECTATIONS:
            problems.append("expect: unknown key %r; accepted: %s" % (key, ", ".join(sorted(_EXPECTATIONS))))
            continue
        kind = _EXPECTATIONS[key]["kind"]
        if value is not None and (not isinstance(value, _KINDS[kind]) or (kind != "bool" and isinstance(value, bool))):
            problems.append("expect.%s: %r is not a %s" % (key, value, kind))
    return problems


def evaluate(chk, probes, expect):
    """Run one check; never raises. Returns the full check record."""
    start = time.monotonic()
    record = _gate(chk, probes)
    if record is None:
        try:
            record = chk.func(dict((name, probes[name]) for name in chk.probes), expect)
            if record.get("status") not in STATUSES:
                raise ValueError("returned status %r" % record.get("status"))
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # A bug in one check must not hide the others: report it as this check's ERROR.
            record = {"status": ERROR, "message": "check crashed: %s: %s" % (type(exc).__name__, exc), "details": {}, "remediation": None}
    out = {"id": chk.id, "title": chk.title, "category": chk.category}
    out.update(record)
    out["duration_ms"] = round((time.monotonic() - start) * 1000.0, 3)
    return out


def _gate(chk, probes):
    for name in chk.requires:
        envelope = probes[name]
        if envelope["status"] == "error":
            return {"status": ERROR, "message": "probe %s failed: %s" % (name, envelope["reason"]), "details": {}, "remediation": None}
        if envelope["status"] == "absent":
            return {"status": SKIP, "message": envelope["reason"], "details": {}, "remediation": None}
    return None


def select(checks, only=None, exclude=None):
    """Checks whose id equals or starts with (at a dot) one of ``only``, minus ``exclude``."""
    def matches(check_id, patterns):
        return any(check_id == p or check_id.startswith(p.rstrip(".") + ".") for p in patterns)
    chosen = [c for c in checks if not only or matches(c.id, only)]
    return [c for c in chosen if not exclude or not matches(c.id, exclude)]


def unknown_patterns(checks, patterns):
    """Patterns that select no check at all: a typo must be an error, not an empty run."""
    return [p for p in patterns or () if not select(checks, only=[p])]
