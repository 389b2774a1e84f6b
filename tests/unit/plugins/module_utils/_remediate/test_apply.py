"""The one remediation lifecycle (apply.lifecycle / apply.run) with a small in-test worker over a dict of settings."""

from typing import Any, Optional

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply


class FakeModule:
    """What the lifecycle uses of AnsibleModule; exit_json / fail_json raise like the real ones exit."""

    def __init__(self, params: dict[str, Any], check_mode: bool = False) -> None:
        self.params = params
        self.check_mode = check_mode
        self.warnings: list[str] = []

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def exit_json(self, **result: Any) -> None:
        raise Exited(result)

    def fail_json(self, msg: str, **result: Any) -> None:
        raise Failed(dict(result, msg=msg))


class Exited(Exception):
    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result)
        self.result = result


class Failed(Exited):
    pass


class BadInput(ValueError):
    pass


class Knobs(apply.Worker):
    """State: {knob: value} (a shared dict standing in for the machine). Plan: [{knob, before, after}]."""

    name = "knobs"
    errors = (BadInput,)

    def __init__(self, module: Any, machine: dict[str, Any], stuck: Optional[set[str]] = None, settle_reads: int = 0,
                 dropped: Optional[set[str]] = None) -> None:
        super().__init__(module)
        self.machine = machine
        self.stuck = stuck or set()  # knobs whose writes do not take
        self.dropped = dropped or set()  # knobs found, right before the change, no longer to be changed
        self.settle_reads = settle_reads  # reads before applied writes show
        self.pending: dict[str, Any] = {}
        self.applied: list[dict[str, Any]] = []
        self.reads = 0

    def read(self) -> dict[str, Any]:
        self.reads += 1
        if self.pending and self.reads >= self.settle_reads:
            self.machine.update(self.pending)
            self.pending = {}
        return dict(self.machine)

    def plan(self, before: dict[str, Any]) -> list[dict[str, Any]]:
        wanted = self.params["knobs"]
        unknown = sorted(set(wanted) - set(before))
        if unknown:
            raise BadInput("knobs: %r is not a knob; known: %s" % (unknown[0], ", ".join(sorted(before))))
        return [{"knob": k, "before": before[k], "after": v} for k, v in sorted(wanted.items()) if before[k] != v]

    def confirm(self, plan: list[dict[str, Any]]) -> None:
        if self.params.get("refuse"):
            raise apply.Failure("knobs: refused", changes=plan)

    def apply(self, plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
        plan = [change for change in plan if change["knob"] not in self.dropped]
        self.applied.extend(plan)
        for change in plan:
            if change["knob"] not in self.stuck:
                self.pending[change["knob"]] = change["after"]
        self.reads = 0
        if not self.settle_reads:
            self.machine.update(self.pending)
            self.pending = {}
        return plan

    def predict(self, before: dict[str, Any], plan: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(before, **{c["knob"]: c["after"] for c in plan})

    def verify(self, done: list[dict[str, Any]], after: dict[str, Any]) -> list[str]:
        return ["%s reads %r" % (c["knob"], after[c["knob"]]) for c in done if after[c["knob"]] != c["after"]]

    def result(self, plan: list[dict[str, Any]], before: dict[str, Any], after: dict[str, Any], applied: bool) -> dict[str, Any]:
        return {"changes": plan, "knobs": after if applied else before}

    def warnings(self, done: list[dict[str, Any]], after: dict[str, Any]) -> list[str]:
        return ["%d knob(s) turned" % len(done)]


def machine() -> dict[str, Any]:
    return {"fan": "low", "lamp": "off", "pump": 1}


def run(params: dict[str, Any], check_mode: bool = False, **worker_args: Any) -> tuple[Exited, Knobs, FakeModule]:
    module = FakeModule(params, check_mode)
    box = machine()
    made: list[Knobs] = []

    def make(mod: Any) -> Knobs:
        made.append(Knobs(mod, box, **worker_args))
        return made[0]

    with pytest.raises(Exited) as caught:
        apply.run(module, make)
    return caught.value, made[0], module


def test_check_mode_reports_the_plan_and_the_predicted_diff_and_applies_nothing() -> None:
    outcome, worker, module = run({"knobs": {"fan": "high", "lamp": "off"}}, check_mode=True)
    assert not isinstance(outcome, Failed)
    assert outcome.result["changed"] is True
    assert outcome.result["changes"] == [{"knob": "fan", "before": "low", "after": "high"}]
    assert outcome.result["knobs"] == machine()  # the state read, not the predicted one
    assert outcome.result["diff"] == {"before": machine(), "after": dict(machine(), fan="high")}
    assert worker.applied == [] and worker.machine == machine()
    assert module.warnings == []


def test_check_mode_skips_the_confirmation() -> None:
    outcome, worker, _module = run({"knobs": {"fan": "high"}, "refuse": True}, check_mode=True)
    assert not isinstance(outcome, Failed) and outcome.result["changed"] is True and worker.applied == []


def test_nothing_to_do_is_not_a_change_and_applies_nothing() -> None:
    outcome, worker, module = run({"knobs": {"fan": "low", "pump": 1}})
    assert not isinstance(outcome, Failed)
    assert outcome.result["changed"] is False and outcome.result["changes"] == []
    assert outcome.result["diff"] == {"before": machine(), "after": machine()}
    assert worker.applied == [] and module.warnings == []


def test_applies_reads_back_and_diffs_before_and_after() -> None:
    outcome, worker, module = run({"knobs": {"fan": "high", "lamp": "on"}})
    assert not isinstance(outcome, Failed)
    assert outcome.result["changed"] is True
    assert [c["knob"] for c in worker.applied] == ["fan", "lamp"]
    after = dict(machine(), fan="high", lamp="on")
    assert outcome.result["knobs"] == after  # read back, not predicted
    assert outcome.result["diff"] == {"before": machine(), "after": after}
    assert module.warnings == ["2 knob(s) turned"]


def test_a_plan_whose_every_change_is_dropped_at_the_last_moment_is_no_change() -> None:
    # The gate re-reads each node right before its change and leaves one an admin re-drained: nothing was done.
    outcome, worker, _module = run({"knobs": {"fan": "high"}}, dropped={"fan"})
    assert not isinstance(outcome, Failed)
    assert outcome.result["changed"] is False and outcome.result["changes"] == [] and worker.applied == []
    assert worker.machine == machine()


def test_a_change_that_does_not_read_back_fails_naming_it_with_the_result() -> None:
    outcome, worker, module = run({"knobs": {"fan": "high", "lamp": "on"}}, stuck={"lamp"})
    assert isinstance(outcome, Failed)
    assert outcome.result["msg"] == "knobs: changes not verified: lamp reads 'off'"
    assert outcome.result["changed"] is True
    assert outcome.result["knobs"] == dict(machine(), fan="high")
    assert outcome.result["diff"]["after"] == dict(machine(), fan="high")
    assert len(worker.applied) == 2
    assert module.warnings == []  # no warnings for a run that did not verify


def test_verification_reads_again_while_allowed_and_pauses_between() -> None:
    module = FakeModule({"knobs": {"fan": "high"}})
    box = machine()
    worker = Knobs(module, box, settle_reads=3)
    worker.verify_reads, worker.verify_pause_s = 5, 0.25
    pauses: list[float] = []
    result = apply.lifecycle(module, lambda _mod: worker, sleep=pauses.append)
    assert result["changed"] is True and result["knobs"]["fan"] == "high"
    assert pauses == [0.25, 0.25]  # read 1 and 2 unsettled, read 3 verifies

    module = FakeModule({"knobs": {"fan": "high"}})
    worker = Knobs(module, machine(), settle_reads=9)
    worker.verify_reads = 2
    pauses = []
    with pytest.raises(apply.Failure) as failure:
        apply.lifecycle(module, lambda _mod: worker, sleep=pauses.append)
    assert failure.value.msg == "knobs: changes not verified: fan reads 'low'"
    assert len(pauses) == 1 and worker.reads == 2


def test_bad_input_is_one_line_and_changes_nothing() -> None:
    outcome, worker, _module = run({"knobs": {"fan": "high", "horn": "loud"}})
    assert isinstance(outcome, Failed)
    assert outcome.result == {"msg": "knobs: 'horn' is not a knob; known: fan, lamp, pump"}
    assert worker.applied == []


def test_a_refusal_before_applying_carries_its_fields_and_changes_nothing() -> None:
    outcome, worker, _module = run({"knobs": {"fan": "high"}, "refuse": True})
    assert isinstance(outcome, Failed)
    assert outcome.result == {"msg": "knobs: refused", "changes": [{"knob": "fan", "before": "low", "after": "high"}]}
    assert worker.applied == [] and worker.machine == machine()


def test_errors_not_declared_by_the_worker_are_not_swallowed() -> None:
    class Broken(Knobs):
        def read(self) -> dict[str, Any]:
            raise KeyError("boom")

    with pytest.raises(KeyError):
        apply.lifecycle(FakeModule({"knobs": {}}), lambda mod: Broken(mod, machine()))
