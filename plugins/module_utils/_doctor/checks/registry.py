# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The check registry: every doctor check is a pure function of probe data.

A check is declared with @check(id, title, requires=..., uses=...). The
function receives ``probes`` (probe name -> envelope, see _doctor.probes.catalogue)
and ``expect`` (the host's hydra_expect dict, read through _expect.get) and returns
_results.finding(...). Its docstring is the rule shown in docs/checks.md:
first line what it reads, the rest the PASS/WARN/FAIL rule.

Probes named in ``requires`` gate the check: a probe that errored makes the
check ERROR with the probe's reason, an absent one makes it SKIP. Probes in
``uses`` are handed over as envelopes whatever their status, for checks that
judge absence themselves (an expected GPU that nvidia-smi cannot see is a FAIL).

Levels (_doctor/levels.py): a check's level is the highest level of the probes it reads
(probes/catalogue.PROBE_LEVELS), or the higher one it declares with ``@check(..., level=DEEP)`` (an active check
whose probe is cheap to call but loads the GPU). ``select(..., level=...)`` leaves out the checks above a run's level.

Root causes: a probe may have a root check (catalogue.PROBE_ROOTS), the one check
that exists to report that probe's failure (``driver.nvidia_smi`` for
``nvidia_smi``). When such a probe errored and its root check runs in the same
run, the other checks that require the probe are SKIP with ``blocked_by: <root
check id>`` instead of repeating the root's ERROR; the root stays ERROR with the
reason. blocked() then makes sure of it: a blocked check whose root is not among
the run's records, or whose root is not itself an ERROR or FAIL, turns back into
the ERROR it was (a failed probe never makes a host look healthy).

Bad lines: a probe that reads line-oriented text skips the lines it cannot read and counts them in its data's
``bad_lines`` (_host/lines.py). evaluate() names them in every check that reads the probe (details.bad_lines, the
message), and a PASS becomes a WARN: the rest was judged, but unread lines are not a healthy reading.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import inspect
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.catalogue import probe_level
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import describe
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, PASS, READ_ABSENT, READ_FAILED, READ_OK, SKIP, STATUSES, WARN, severity

Envelope = dict[str, Any]  # a probe's envelope: status (READ_OK / READ_ABSENT / READ_FAILED), data, reason, duration_ms
Probes = dict[str, Envelope]  # probe name -> envelope, as a check receives them
Expect = Mapping[str, Any]  # the host's hydra_expect (read values with _expect.get)
Finding = dict[str, Any]  # what _results.finding returns
CheckFunc = Callable[[Probes, Expect], Finding]

_REGISTRY: list["Check"] = []


class Check:
    def __init__(self, check_id: str, title: str, func: CheckFunc, requires: Iterable[str], uses: Iterable[str],
                 level: Optional[str] = None) -> None:
        self.id = check_id
        self.title = title
        self.category = check_id.split(".", 1)[0]
        self.func = func
        self.requires = tuple(requires)
        self.uses = tuple(uses)
        self.rule = inspect.cleandoc(func.__doc__ or "")
        self.declared_level = level

    @property
    def probes(self) -> tuple[str, ...]:
        return self.requires + tuple(p for p in self.uses if p not in self.requires)

    @property
    def level(self) -> str:
        """The lowest doctor level that runs this check: its probes' highest level, or the higher one declared."""
        return levels.highest([self.declared_level] + [probe_level(name) for name in self.probes])

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "category": self.category, "level": self.level, "reads": list(self.probes),
                "rule": self.rule}


def check(check_id: str, title: str, requires: Iterable[str] = (), uses: Iterable[str] = (),
          level: Optional[str] = None) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check function under a stable dotted id; ``level`` raises it above its probes' level (levels.py)."""
    if level is not None and not levels.is_level(level):
        raise ValueError("check %s: level %r is not one of %s" % (check_id, level, ", ".join(levels.LEVELS)))

    def register(func: CheckFunc) -> CheckFunc:
        if any(c.id == check_id for c in _REGISTRY):
            raise ValueError("duplicate check id %s" % check_id)
        _REGISTRY.append(Check(check_id, title, func, requires, uses, level))
        return func
    return register


def registered() -> list[Check]:
    return list(_REGISTRY)


def evaluate(chk: Check, probes: Mapping[str, Envelope], expect: Expect, roots: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """Run one check; never raises. Returns the full check record.

    ``roots``: probe name -> root check id, for the roots selected in this run (see roots_for()); a check whose
    required probe failed is then SKIP with ``blocked_by`` the root's id. Pass the records through blocked()
    afterwards: it turns a blocked check back into an ERROR when its root did not report the failure.
    """
    start = time.monotonic()
    record = _gate(chk, probes, roots or {})
    if record is None:
        try:
            record = chk.func({name: probes[name] for name in chk.probes}, expect)
            if record.get("status") not in STATUSES:
                raise ValueError("returned status %r" % record.get("status"))
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # A bug in one check must not hide the others: report it as this check's ERROR.
            record = {"status": ERROR, "message": "check crashed: %s: %s" % (type(exc).__name__, exc), "details": {}, "remediation": None}
        record = _blocked_error(chk, probes, roots or {}, _with_bad_lines(chk, probes, record))
    out: dict[str, Any] = {"id": chk.id, "title": chk.title, "category": chk.category}
    out.update(record)
    out["duration_ms"] = round((time.monotonic() - start) * 1000.0, 3)
    return out


def _gate(chk: Check, probes: Mapping[str, Envelope], roots: Mapping[str, str]) -> Optional[Finding]:
    for name in chk.requires:
        envelope = probes[name]
        if envelope["status"] == READ_FAILED:
            message = "probe %s failed: %s" % (name, envelope["reason"])
            root = roots.get(name)
            if root is not None and root != chk.id:
                return {"status": SKIP, "message": _blocked_prefix(root) + message, "details": {}, "remediation": None,
                        "blocked_by": root}
            return {"status": ERROR, "message": message, "details": {}, "remediation": None}
        if envelope["status"] == READ_ABSENT:
            return {"status": SKIP, "message": envelope["reason"], "details": {}, "remediation": None}
    return None


BAD_LINES_ADVICE = ("Read the lines named in details.bad_lines in the tool's output or log by hand: doctor skipped "
                    "them, and one of them may be what this check looks for.")


def _with_bad_lines(chk: Check, probes: Mapping[str, Envelope], record: Finding) -> Finding:
    """The record naming the lines its probes could not read (details.bad_lines, the message); a PASS is a WARN."""
    found = dict((name, probes[name]["data"]["bad_lines"]) for name in chk.probes
                 if probes[name]["status"] == READ_OK and isinstance(probes[name]["data"], dict)
                 and (probes[name]["data"].get("bad_lines") or {}).get("count"))
    if not found:
        return record
    record = dict(record, details=dict(record.get("details") or {}, bad_lines=found))
    notes = "; ".join("%s in %s" % (describe(bad), name) for name, bad in found.items())
    record["message"] = "%s; %s" % (record.get("message"), notes)
    if record.get("status") == PASS:
        record.update(status=WARN, remediation=BAD_LINES_ADVICE)
    return record


def _blocked_error(chk: Check, probes: Mapping[str, Envelope], roots: Mapping[str, str], record: Finding) -> Finding:
    """A check that judges a failed probe itself (``uses``) and comes to ERROR repeats its root: blocked by it too.

    Only an ERROR is taken over (a FAIL, such as GPUs expected but unseen, stands on its own).
    """
    if record.get("status") != ERROR:
        return record
    for name in chk.probes:
        root = roots.get(name)
        if probes.get(name, {}).get("status") == READ_FAILED and root is not None and root != chk.id:
            return dict(record, status=SKIP, message=_blocked_prefix(root) + str(record.get("message")),
                        blocked_by=root)
    return record


def _blocked_prefix(root: str) -> str:
    return "blocked by %s: " % root


def roots_for(selected: Iterable[Check], probe_roots: Mapping[str, str]) -> dict[str, str]:
    """probe name -> root check id, for the probes whose root check is among ``selected`` (the run's checks)."""
    ids = {chk.id for chk in selected}
    return dict((probe, root) for probe, root in probe_roots.items() if root in ids)


def blocked(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with each ``blocked_by`` pointing at the check that reports the failure, or undone.

    A chain (a root that is itself blocked) is followed to its end. When the end is not among the records or is not
    an ERROR or FAIL (nothing reports the failed probe), the blocked check becomes the ERROR it would have been:
    a failed probe must never leave a host looking healthy.
    """
    by_id = dict((r.get("id"), r) for r in records)
    out = []
    for record in records:
        root = record.get("blocked_by")
        if root is None:
            out.append(record)
            continue
        seen = {record.get("id")}
        while root in by_id and by_id[root].get("blocked_by") and root not in seen:
            seen.add(root)
            root = by_id[root]["blocked_by"]
        end = by_id.get(root)
        record = dict(record)
        if end is not None and not end.get("blocked_by") and severity(end["status"]) >= severity(ERROR):
            record["blocked_by"] = root
        else:
            prefix = _blocked_prefix(record.pop("blocked_by"))
            message = str(record.get("message") or "")
            record["status"] = ERROR
            record["message"] = message[len(prefix):] if message.startswith(prefix) else message
        out.append(record)
    return out


def select(checks: Sequence[Check], only: Optional[Sequence[str]] = None, exclude: Optional[Sequence[str]] = None,
           level: Optional[str] = None) -> list[Check]:
    """Checks whose id equals or starts with (at a dot) one of ``only``, minus ``exclude``, at or below ``level``."""
    chosen = [c for c in checks if not only or _matches(c.id, only)]
    chosen = [c for c in chosen if not exclude or not _matches(c.id, exclude)]
    return [c for c in chosen if level is None or levels.within(c.level, level)]


def _matches(check_id: str, patterns: Sequence[str]) -> bool:
    return any(check_id == p or check_id.startswith(p.rstrip(".") + ".") for p in patterns)


def above_level(checks: Sequence[Check], patterns: Optional[Sequence[str]], level: str) -> list[tuple[str, str]]:
    """Patterns that select checks, all of them above ``level``: [(pattern, the lowest level that runs them)]."""
    out = []
    for pattern in patterns or ():
        matched = select(checks, only=[pattern])
        if matched and not select(matched, level=level):
            out.append((pattern, min((c.level for c in matched), key=levels.rank)))
    return out


def unknown_patterns(checks: Sequence[Check], patterns: Optional[Sequence[str]]) -> list[str]:
    """Patterns that select no check at all: a typo must be an error, not an empty run."""
    return [p for p in patterns or () if not select(checks, only=[p])]
