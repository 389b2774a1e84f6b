# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one remediation lifecycle: read -> plan -> check mode -> apply -> read back -> verify -> diff.

Every ``*_apply`` module is a thin ``main()`` that builds its AnsibleModule and calls ``run(module, SomeWorker)``.
A worker (a subclass of ``Worker``) knows its feature: how to read the state, what the plan is, how to carry it out
and what the result keys are. ``run`` owns the order of the steps and what every run returns:

- bad input or a refusal (the worker's ``errors``, or ``Failure``) fails the module with one line and changes nothing;
- check mode, and a plan with nothing to do, stop after the plan: ``changed`` says whether there is something to do,
  the diff shows the state before and the state the plan predicts;
- otherwise the plan is applied, the state read back (``verify_reads`` times at most, while it does not verify), and
  whatever does not read back fails the module with ``<name>: changes not verified: ...`` and the full result;
- ``changed`` is true only when a plan was carried out and did something (what ``apply`` returns).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import time
from typing import Any, Callable, NoReturn

State = Any  # what a worker reads: its own shape
Plan = Any  # what a worker plans and applies: its own shape (usually a list of changes)


class Failure(Exception):
    """Fail the module with one line, plus result keys (``fields``) the worker wants returned with it."""

    def __init__(self, msg: str, **fields: Any) -> None:
        super().__init__(msg)
        self.msg = msg
        self.fields = fields


class Worker:
    """One feature's steps; ``run`` calls them in order. Subclasses set ``name`` and implement the abstract steps."""

    name = "remediate"  # prefix of the "changes not verified" message
    errors: tuple[type[Exception], ...] = ()  # exceptions that mean bad input or unusable state: one-line failures
    verify_reads = 1  # reads allowed for the changes to show (a daemon may take a moment)
    verify_pause_s = 0.0  # pause between those reads

    def __init__(self, module: Any) -> None:
        self.module = module
        self.params: dict[str, Any] = module.params

    # ---- steps every worker implements --------------------------------------------------------------------

    def read(self) -> State:
        """The current state (before any change)."""
        raise NotImplementedError

    def plan(self, before: State) -> Plan:
        """What to change, from the state read; raise one of ``errors`` or ``Failure`` to refuse."""
        raise NotImplementedError

    def apply(self, plan: Plan) -> Plan:
        """Carry the plan out; return what was done (by default the plan itself)."""
        raise NotImplementedError

    def verify(self, done: Plan, after: State) -> list[str]:
        """What of ``done`` the state read back does not show, one phrase each (empty when all took)."""
        raise NotImplementedError

    def result(self, plan: Plan, before: State, after: State, applied: bool) -> dict[str, Any]:
        """The module's own result keys (without changed and diff).

        ``after`` is the state read back when ``applied``, else the state the plan predicts.
        """
        raise NotImplementedError

    # ---- steps with a default -----------------------------------------------------------------------------

    def changed(self, plan: Plan) -> bool:
        """Whether the plan has anything to do."""
        return bool(plan)

    def confirm(self, plan: Plan) -> None:
        """Last word before applying (not in check mode); raise ``Failure`` to refuse."""

    def read_back(self, before: State) -> State:
        """The state after applying; by default read again."""
        return self.read()

    def predict(self, before: State, plan: Plan) -> State:
        """The state the plan would bring, for check mode (by default: the plan changes nothing readable)."""
        return before

    def view(self, state: State) -> Any:
        """A state as the diff shows it."""
        return state

    def diff(self, plan: Plan, before: State, after: State) -> dict[str, Any]:
        return {"before": self.view(before), "after": self.view(after)}

    def warnings(self, done: Plan, after: State) -> list[str]:
        """Warnings for a verified run."""
        return []


def deadline_s(worker: type[Worker], call_timeout_s: float, calls_per_read: int, changes: int) -> float:
    """The most a run of ``worker`` takes when each external call may take ``call_timeout_s``: the read, one call per
    change, and at most ``verify_reads`` read-backs with their pauses (the reads ``calls_per_read`` calls each)."""
    reads = 1 + max(1, worker.verify_reads)
    return call_timeout_s * (reads * calls_per_read + changes) + (max(1, worker.verify_reads) - 1) * worker.verify_pause_s


def lifecycle(module: Any, make_worker: Callable[[Any], Worker], sleep: Callable[[float], Any] = time.sleep) -> dict[str, Any]:
    """Run the lifecycle; returns the result of a successful run, raises ``Failure`` (with the result) otherwise."""
    worker = make_worker(module)
    try:
        return _steps(module, worker, sleep)
    except worker.errors as exc:
        raise Failure(str(exc)) from exc


def _steps(module: Any, worker: Worker, sleep: Callable[[float], Any]) -> dict[str, Any]:
    before = worker.read()
    plan = worker.plan(before)
    if module.check_mode or not worker.changed(plan):
        predicted = worker.predict(before, plan)
        return dict(worker.result(plan, before, predicted, applied=False), changed=worker.changed(plan),
                    diff=worker.diff(plan, before, predicted))
    worker.confirm(plan)
    done = worker.apply(plan)
    problems: list[str] = []
    for attempt in range(max(1, worker.verify_reads)):
        if attempt:
            sleep(worker.verify_pause_s)
        after = worker.read_back(before)
        problems = worker.verify(done, after)
        if not problems:
            break
    # What was done, not what was planned: a change the worker dropped at the last moment (a node an admin re-drained
    # after the plan) is no change.
    result = dict(worker.result(done, before, after, applied=True), changed=worker.changed(done),
                  diff=worker.diff(done, before, after))
    if problems:
        raise Failure("%s: changes not verified: %s" % (worker.name, "; ".join(problems)), **result)
    for warning in worker.warnings(done, after):
        module.warn(warning)
    return result


def run(module: Any, make_worker: Callable[[Any], Worker]) -> NoReturn:
    """A module's whole main(): the lifecycle, then exit_json or fail_json."""
    try:
        result = lifecycle(module, make_worker)
    except Failure as exc:
        module.fail_json(msg=exc.msg, **exc.fields)
        raise  # fail_json exits; this only keeps a stubbed module from going on
    module.exit_json(**result)
    raise SystemExit(0)  # exit_json exits; likewise
