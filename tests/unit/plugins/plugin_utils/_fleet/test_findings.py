"""Findings that last: open until acknowledged, reopened when seen again, worst status kept, the escalation
ladder per GPU across reboots, and a store that is never lost silently."""

import json
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, SKIP, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import findings

GPU0 = gpu_ref({"index": 0, "pci_bus_id": "00000000:01:00.0", "uuid": "GPU-aaaa", "name": "A100"})
GPU1 = gpu_ref({"index": 1, "pci_bus_id": "00000000:41:00.0", "uuid": "GPU-bbbb", "name": "A100"})


def check(check_id, status, gpus=(), **extra):
    record = dict(finding(status, "%s is %s" % (check_id, status), {"gpus": list(gpus)} if gpus else {}), id=check_id)
    record.update(extra)
    return record


def report(when, hosts):
    """hosts: name -> (boot id, [checks]); a None value is a host without a doctor result (unreachable)."""
    entries = {}
    for name, value in hosts.items():
        if value is None:
            entries[name] = {"status": "unreachable", "doctor": None}
        else:
            boot, checks = value
            entries[name] = {"doctor": {"environment": {"boot_id": boot}, "checks": checks}}
    return {"generated_at": when, "hosts": entries}


def day(n):
    return "2026-11-%02dT08:00:00+00:00" % n


def fold(*reports, state=None):
    state = state or findings.empty_state()
    for rep in reports:
        state = findings.update(state, rep)
    return state


def only(state, **match):
    found = [f for f in state["findings"] if all(f.get(k) == v for k, v in match.items())]
    assert len(found) == 1, found
    return found[0]


ECC = "gpu.ecc_errors"


def test_one_finding_per_host_check_and_gpu_for_problems_only():
    state = fold(report(day(20), {"h1": ("b1", [
        check(ECC, FAIL, [GPU0, GPU1]), check("gpu.persistence_mode", WARN, [GPU1]), check("system.time_sync", ERROR),
        check("gpu.clocks", PASS, [GPU0]), check("gpu.mig", SKIP), check("gpu.temperature", ERROR, [GPU0], blocked_by="driver.nvidia_smi"),
    ])}))
    keys = sorted((f["host"], f["check_id"], f["gpu_uuid"]) for f in state["findings"])
    assert keys == [("h1", ECC, "GPU-aaaa"), ("h1", ECC, "GPU-bbbb"), ("h1", "gpu.persistence_mode", "GPU-bbbb"),
                    ("h1", "system.time_sync", None)]
    ecc = only(state, gpu_uuid="GPU-aaaa")
    assert ecc["open"] is True and ecc["acknowledged"] is None and ecc["times_seen"] == 1
    assert ecc["first_seen"] == ecc["last_seen"] == day(20) and ecc["status"] == FAIL and ecc["gpu_index"] == 0


def test_a_finding_stays_open_after_the_check_turns_healthy():
    state = fold(report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0])])}),
                 report(day(21), {"h1": ("b1", [check(ECC, PASS, [GPU0])])}),
                 report(day(22), {"h1": None}))
    ecc = only(state, check_id=ECC)
    assert ecc["open"] is True and ecc["times_seen"] == 1 and ecc["last_seen"] == day(20)
    assert [f["check_id"] for f in findings.open_findings(findings.listing(state))] == [ECC]


def test_acknowledging_closes_and_a_reappearance_reopens_with_the_count_going_on():
    state = fold(report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0]), check("system.time_sync", WARN)]),
                                  "h2": ("c1", [check(ECC, FAIL, [GPU1])])}))
    state, closed = findings.acknowledge(state, ["h1"], [ECC], "ops", day(21), "reset, looks fine")
    assert [(f["host"], f["check_id"]) for f in closed] == [("h1", ECC)]
    ecc = only(state, host="h1", check_id=ECC)
    assert ecc["open"] is False and ecc["acknowledged"] == {"by": "ops", "at": day(21), "note": "reset, looks fine"}
    assert only(state, check_id="system.time_sync")["open"] is True and only(state, host="h2")["open"] is True
    # twice: nothing more to close, no error
    assert findings.acknowledge(state, ["h1"], [ECC], "ops", day(21))[1] == []
    # closed findings stay in the listing, after the open ones
    assert [f["open"] for f in findings.listing(state)] == [True, True, False]
    state = fold(report(day(22), {"h1": ("b1", [check(ECC, FAIL, [GPU0])])}), state=state)
    ecc = only(state, host="h1", check_id=ECC)
    assert ecc["open"] is True and ecc["acknowledged"] is None and ecc["times_seen"] == 2
    assert ecc["first_seen"] == day(20) and ecc["last_seen"] == day(22)


def test_without_checks_every_finding_of_the_host_is_closed():
    state = fold(report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0]), check("system.time_sync", WARN)])}))
    state, closed = findings.acknowledge(state, ["h1"], [], "ops", day(21))
    assert len(closed) == 2 and not findings.open_findings(state["findings"])


@pytest.mark.parametrize("hosts, checks, message", [
    ([], [], "no hosts given"),
    (["h9"], [], "no finding for host 'h9'"),
    (["h1"], ["gpu.nope"], "no finding for check 'gpu.nope' on 'h1'"),
])
def test_bad_acknowledge_input_names_the_value(hosts, checks, message):
    state = fold(report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0])])}))
    with pytest.raises(findings.AckError, match=message):
        findings.acknowledge(state, hosts, checks, "ops", day(21))


def test_the_worst_status_seen_is_kept_and_the_message_is_the_latest():
    state = fold(report(day(20), {"h1": ("b1", [check("gpu.pcie_link", WARN, [GPU0])])}),
                 report(day(21), {"h1": ("b1", [check("gpu.pcie_link", FAIL, [GPU0])])}),
                 report(day(22), {"h1": ("b1", [check("gpu.pcie_link", WARN, [GPU0])])}))
    link = only(state, check_id="gpu.pcie_link")
    assert link["status"] == FAIL and link["times_seen"] == 3 and link["message"] == "gpu.pcie_link is WARN"


def test_the_ladder_climbs_on_each_reboot_the_fault_survives():
    xid = "gpu.xid_errors"
    first = fold(report(day(18), {"h1": ("boot-1", [check(xid, FAIL, [GPU0])])}))
    assert only(first, check_id=xid)["escalation"] == {
        "level": 1, "action": findings.LADDER[1], "why": "gpu.xid_errors first seen 2026-11-18; not seen after a reboot yet"}
    same_boot = fold(report(day(19), {"h1": ("boot-1", [check(xid, FAIL, [GPU0])])}), state=first)
    assert only(same_boot, check_id=xid)["escalation"]["level"] == 1
    rebooted = fold(report(day(20), {"h1": ("boot-2", [check(xid, FAIL, [GPU0])])}), state=same_boot)
    level2 = only(rebooted, check_id=xid)["escalation"]
    assert level2["level"] == 2 and level2["action"].startswith("reboot")
    assert level2["why"] == "gpu.xid_errors again after reboot 2026-11-20"
    # healthy in between (boot-3), back after the next reboot: RMA
    rma = fold(report(day(21), {"h1": ("boot-3", [check(xid, PASS, [GPU0])])}),
               report(day(23), {"h1": ("boot-4", [check(xid, FAIL, [GPU0])])}), state=rebooted)
    level3 = only(rma, check_id=xid)
    assert level3["escalation"]["level"] == 3 and "RMA" in level3["escalation"]["action"]
    assert level3["escalation"]["why"].startswith("gpu.xid_errors again after reboot 2026-11-23")
    assert [r["boot_id"] for r in level3["reboots"]] == ["boot-2", "boot-4"]
    # and it stays at the top
    assert only(fold(report(day(24), {"h1": ("boot-5", [check(xid, FAIL, [GPU0])])}), state=rma), check_id=xid)["escalation"]["level"] == 3


def test_no_ladder_for_host_level_or_warning_findings_or_unknown_boots():
    state = fold(report(day(20), {"h1": ("b1", [check("system.time_sync", FAIL), check("gpu.persistence_mode", WARN, [GPU0])])}),
                 report(day(21), {"h1": ("b2", [check("system.time_sync", FAIL), check("gpu.persistence_mode", WARN, [GPU0])])}))
    assert all(f["escalation"] is None for f in state["findings"])
    unknown = fold(report(day(20), {"h1": (None, [check(ECC, FAIL, [GPU0])])}), report(day(21), {"h1": (None, [check(ECC, FAIL, [GPU0])])}))
    assert only(unknown, check_id=ECC)["escalation"]["level"] == 1


def test_old_acknowledged_findings_are_dropped():
    state = fold(report(day(1), {"h1": ("b1", [check(ECC, FAIL, [GPU0])])}))
    state, _closed = findings.acknowledge(state, ["h1"], [], "ops", "2026-01-01T00:00:00+00:00")
    assert fold(report(day(20), {"h2": ("c1", [])}), state=state)["findings"] == []


def test_the_store_round_trips(tmp_path):
    path = findings.store_path(str(tmp_path / "history"))
    problems = []
    assert findings.read_store(path, problems) == findings.empty_state() and problems == []
    state = fold(report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0])])}))
    findings.write_store(path, state)
    assert findings.read_store(path, problems) == state and problems == []
    assert [n for n in os.listdir(tmp_path / "history") if n.endswith(".tmp")] == []


@pytest.mark.parametrize("content", ["{not json", json.dumps({"kind": "something else", "findings": []}), json.dumps([1, 2])])
def test_an_unreadable_store_is_one_warning_kept_aside_and_starts_empty(tmp_path, content):
    path = findings.store_path(str(tmp_path))
    with open(path, "w") as handle:
        handle.write(content)
    problems = []
    assert findings.read_store(path, problems) == findings.empty_state()
    assert len(problems) == 1 and "\n" not in problems[0] and path in problems[0]
    aside = [n for n in os.listdir(tmp_path) if n.startswith(findings.STORE_NAME + ".bad-")]
    assert len(aside) == 1 and aside[0] in problems[0]
    with open(os.path.join(tmp_path, aside[0])) as handle:
        assert handle.read() == content
    assert not os.path.exists(path)


def _stored(tmp_path, **changes):
    """A store written by the production code with one GPU finding, then one field of it changed to ``changes``."""
    state = fold(report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0])])}),
                 report(day(21), {"h1": ("b2", [check(ECC, FAIL, [GPU0])])}))
    state["findings"][0].update(changes)
    path = findings.store_path(str(tmp_path))
    with open(path, "w") as handle:
        handle.write(json.dumps(state))
    return path


# Issue 23: each of these left the store broken for good ("findings: not updated" on every run, no findings).
@pytest.mark.parametrize("changes, named", [
    ({"times_seen": "abc"}, "times_seen: 'abc' is not a count"),
    ({"times_seen": float("nan")}, "times_seen: nan is not a count"),
    ({"times_seen": True}, "times_seen: True is not a count"),
    ({"reboots": 5}, "reboots: 5 is not a list of {boot_id, seen}"),
    ({"reboots": [{"boot_id": 7, "seen": day(21)}]}, "reboots: [{'boot_id': 7"),
    ({"host": 5}, "host: 5 is not a non-empty string"),
    ({"check_id": ""}, "check_id: '' is not a non-empty string"),
    ({"gpu_index": float("nan")}, "gpu_index: nan is not a GPU index"),
    ({"gpu_uuid": 3}, "gpu_uuid: 3 is not a string or null"),
    ({"status": "BAD"}, "status: 'BAD' is not one of FAIL, ERROR, WARN"),
    ({"open": "yes"}, "open: 'yes' is not true or false"),
    ({"first_seen": 17}, "first_seen: 17 is not an ISO 8601 time"),
    ({"acknowledged": "ops"}, "acknowledged: 'ops' is not null or {by, at, note}"),
    ({"message": None}, "message: None is not a string"),
    ({"boot_id": ["b"]}, "boot_id: ['b'] is not a string or null"),
    ({"escalation": 2}, "escalation: 2 is not null or {level, action, why}"),
])
def test_a_field_of_the_wrong_type_sets_the_store_aside_naming_it(tmp_path, changes, named):
    path = _stored(tmp_path, **changes)
    problems = []
    state = findings.read_store(path, problems)
    assert state == findings.empty_state()
    assert len(problems) == 1 and named in problems[0] and "finding 1" in problems[0], problems
    assert "\n" not in problems[0] and "kept as %s.bad-" % path in problems[0]
    assert not os.path.exists(path)
    # and the next run works from the empty store: a report has findings again
    after = findings.update(state, report(day(22), {"h1": ("b2", [check(ECC, FAIL, [GPU0])])}))
    assert [f["check_id"] for f in after["findings"]] == [ECC]


def test_a_store_of_the_right_shape_is_kept_whole(tmp_path):
    path = _stored(tmp_path)
    problems = []
    assert findings.read_store(path, problems)["findings"][0]["reboots"][0]["boot_id"] == "b2" and problems == []
    assert os.path.exists(path)


def test_a_store_that_is_a_fifo_is_set_aside_at_once_not_waited_on(tmp_path):
    path = findings.store_path(str(tmp_path))
    os.mkfifo(path)
    problems = []
    assert findings.read_store(path, problems) == findings.empty_state()  # no writer ever opens it: a hang before
    assert len(problems) == 1 and "is a FIFO" in problems[0] and path in problems[0]
    assert not os.path.exists(path)


# ---------------------------------------------------------------- the timeline (issue 29): opened and closed per run

def test_each_run_records_what_it_opened_what_was_closed_since_the_run_before_and_what_is_open():
    first = report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0, GPU1])]), "h2": ("c1", [check("system.time_sync", WARN)])})
    state = fold(first)
    state, _closed = findings.acknowledge(state, ["h2"], [], "ops", "2026-11-20T12:00:00+00:00", "clock fixed")
    # the next run: h2 healthy (its acknowledged finding stays closed), h1's GPU 1 clean but its finding open
    state = fold(report(day(21), {"h1": ("b1", [check(ECC, FAIL, [GPU0])]), "h2": ("c1", [])}), state=state)
    state, _closed = findings.acknowledge(state, ["h1"], [ECC], "ops", "2026-11-21T12:00:00+00:00", "GPUs replaced")
    # then h1's GPU 0 fails again (its finding reopens) and h3 appears with a new one
    state = fold(report(day(22), {"h1": ("b2", [check(ECC, FAIL, [GPU0])]), "h3": ("d1", [check("gpu.mig", WARN)])}), state=state)
    assert findings.timeline(state) == [
        {"at": day(20), "opened": 3, "closed": 0, "open": 3},
        {"at": day(21), "opened": 0, "closed": 1, "open": 2},
        {"at": day(22), "opened": 2, "closed": 1, "open": 2},
    ]


def test_the_store_keeps_the_last_runs_of_the_timeline_and_round_trips_them(tmp_path):
    reports = [report("2026-11-%02dT08:00:00+00:00" % n, {"h1": ("b1", [check(ECC, FAIL, [GPU0])])})
               for n in range(1, findings.RUNS_KEPT + 3)]
    state = fold(*reports)
    runs = findings.timeline(state)
    assert len(runs) == findings.RUNS_KEPT and runs[0]["at"] == reports[2]["generated_at"] and runs[-1]["open"] == 1
    path = findings.store_path(str(tmp_path))
    findings.write_store(path, state)
    problems = []
    assert findings.read_store(path, problems) == state and problems == []


@pytest.mark.parametrize("runs, named", [
    ("many", 'entry 1, "many", is not'),
    ([{"at": day(20), "opened": -1, "closed": 0, "open": 1}], "entry 1, "),
    ([{"at": day(20), "opened": 1, "closed": 0, "open": 1}, {"at": "yesterday", "opened": 1, "closed": 0, "open": 1}], "entry 2, "),
])
def test_a_bad_timeline_entry_sets_the_store_aside_naming_it(tmp_path, runs, named):
    path = _stored(tmp_path)
    with open(path) as handle:
        state = json.load(handle)
    state["runs"] = runs
    with open(path, "w") as handle:
        handle.write(json.dumps(state))
    problems = []
    assert findings.read_store(path, problems) == findings.empty_state()
    assert len(problems) == 1 and "runs: " + named in problems[0] and "{'" not in problems[0], problems


def test_a_store_just_read_is_folded_in_place_into_the_same_state_and_listing():
    """update_store hands update() the store it has just read (owned): its findings are reused, not copied - and the
    state, the file and the report's listing are what the copying fold gives."""
    earlier = fold(report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0, GPU1])]), "h2": ("b2", [check("system.time_sync", WARN)])}),
                   report(day(21), {"h1": ("b2", [check(ECC, FAIL, [GPU0])]), "h2": ("b2", [])}))
    text = json.dumps(earlier)
    run = report(day(22), {"h1": ("b3", [check(ECC, FAIL, [GPU0]), check("gpu.clocks", WARN, [GPU1])]), "h2": None})
    copied = findings.update(json.loads(text), run)
    previous = json.loads(text)
    in_place = findings.update(previous, run, owned=True)
    assert in_place == copied
    assert any(f is g for f in in_place["findings"] for g in previous["findings"])  # the store's own dicts, not copies
    assert findings.listing(in_place, shared=True) == findings.listing(copied)
    assert all(any(f is g for g in in_place["findings"]) for f in findings.listing(in_place, shared=True))


def test_the_store_is_written_in_pieces_as_one_json_text(tmp_path):
    state = fold(report(day(20), {"h1": ("b1", [check(ECC, FAIL, [GPU0])]), "h\u00e9": ("b1", [check("system.time_sync", ERROR)])}))
    path = str(tmp_path / "findings.json")
    findings.write_store(path, state)
    with open(path, encoding="utf-8") as handle:
        assert handle.read() == json.dumps(state, indent=1, sort_keys=True) + "\n"
