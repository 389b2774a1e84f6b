"""Interconnect health over time: each host's counters are read by the real probes and checks from recorded trees
(GPUd's H100 /sys/class/infiniband, a recorded `nvidia-smi nvlink -e`, procfs' AER files), deltas, resets and state
changes are planted in the copies between runs, and the fleet analysis (with the history in between, as the callback
runs it) is asserted exactly."""

import json
import re

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import history, interconnect
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.tests.support import fleet_factory
from ansible_collections.continuum.hydra.tests.support import interconnect as ic
from ansible_collections.continuum.hydra.tests.support.interconnect import HOUR, T0, Fleet, ours


def section(report):
    return report["analysis"]["interconnect"]


def rows(report, counter=None, status=None):
    return [r for r in section(report)["rates"] if (counter is None or r["counter"] == counter)
            and (status is None or r["status"] == status)]


def test_a_first_run_reports_lifetime_totals_as_information_only(tmp_path):
    fleet = Fleet(tmp_path)
    report = fleet.run(T0, "2026-11-22T10:00:00+00:00")
    ib = section(report)
    host = fleet.names[0]
    assert ib["hosts"] == {host: "first reading"}
    assert ib["rates"] == [] and ib["findings"] == [] and ib["resets"] == []
    # As recorded: mlx5_1's 8-bit link_downed stopped at 255, 4-bit excessive_buffer_overrun_errors at 15.
    lifetime = dict(((r["subject"], r["counter"]), r["value"]) for r in ib["lifetime"])
    assert lifetime[("mlx5_1/1", "link_downed")] == 255
    assert lifetime[("mlx5_0/1", "excessive_buffer_overrun_errors")] == 15
    assert lifetime[("mlx5_0/1", "port_rcv_errors")] == 14
    assert not [a for a in report["actions"] if a["check_id"].startswith("interconnect.")]


def test_symbol_errors_above_120_per_hour_fail_and_the_action_names_the_port_and_the_cable(tmp_path):
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    ic.add_to_counter(fleet.roots[host], "mlx5_4", "symbol_error", 500)   # 250 per hour over 2 h: FAIL
    ic.add_to_counter(fleet.roots[host], "mlx5_5", "symbol_error", 200)   # 100 per hour: under 120
    report = fleet.run(T0 + 2 * HOUR, "2026-11-22T12:00:00+00:00")
    assert section(report)["hosts"] == {host: "compared"}
    failing = rows(report, "symbol_error", FAIL)
    assert [(r["subject"], r["delta"], r["rate"], r["limit"], r["unit"]) for r in failing] == [("mlx5_4/1", 500, 250.0, 120.0, "hour")]
    (passing,) = rows(report, "symbol_error", PASS)
    assert (passing["subject"], passing["rate"]) == ("mlx5_5/1", 100.0)
    (finding,) = section(report)["findings"]
    assert (finding["host"], finding["check_id"], finding["subject"], finding["status"]) == (
        host, "interconnect.ib_errors", "mlx5_4/1", FAIL)
    assert finding["message"] == "symbol_error 250/hour over 2.0 h (limit 120/hour)"
    (action,) = [a for a in report["actions"] if a["check_id"] == "interconnect.ib_errors"]
    assert action["status"] == FAIL and action["hosts"] == [host] and action["subjects"] == ["%s mlx5_4/1" % host]
    assert "mlx5_4/1" in action["remediation"] and "cable" in action["remediation"] and "transceiver" in action["remediation"]
    assert report["actions"][0] is action or report["actions"][0]["status"] == FAIL  # ranked with the FAILs


def test_a_rate_is_counted_over_at_least_its_own_unit_never_from_seconds(tmp_path):
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    ic.add_to_counter(fleet.roots[host], "mlx5_4", "symbol_error", 60)   # 10 s apart: 60 in the hour, not 21,600/h
    report = fleet.run(T0 + 10, "2026-11-22T10:00:10+00:00")
    (row,) = rows(report, "symbol_error")
    assert (row["rate"], row["status"]) == (60.0, PASS)
    ic.add_to_counter(fleet.roots[host], "mlx5_4", "symbol_error", 121)  # 121 within the next minute: over 120/h
    report = fleet.run(T0 + 70, "2026-11-22T10:01:10+00:00")
    (row,) = rows(report, "symbol_error")
    assert (row["rate"], row["status"]) == (121.0, FAIL)


@pytest.mark.parametrize("reset", ["cleared", "reboot", "firmware"])
def test_a_reset_restarts_the_interval_the_rate_is_unknown_never_negative_or_huge(tmp_path, reset):
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    root = fleet.roots[host]
    ic.set_counter(root, "mlx5_4", "symbol_error", 40000)
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    boots = None
    if reset == "cleared":        # perfquery -R, or a driver reload: every counter of the port back near 0
        ic.set_counter(root, "mlx5_4", "symbol_error", 3)
    elif reset == "reboot":       # a new boot id; the counters happen to be higher than before
        ic.set_counter(root, "mlx5_4", "symbol_error", 40500)
        boots = {host: "boot-2"}
    else:                         # a firmware update resets the NIC
        (root / "sys/class/infiniband/mlx5_4/fw_ver").write_text("28.42.1000\n")
        ic.set_counter(root, "mlx5_4", "symbol_error", 40500)
    report = fleet.run(T0 + HOUR, "2026-11-22T11:00:00+00:00", boots=boots)
    ib = section(report)
    resets = [r for r in ib["resets"] if r["subject"] == "mlx5_4/1"]
    assert len(resets) == 1
    assert {"cleared": "symbol_error lower than the last run's", "reboot": "reboot since the last run",
            "firmware": "firmware 28.41.1000 -> 28.42.1000"}[reset] in resets[0]["reason"]
    assert [r for r in ib["rates"] if r["subject"] == "mlx5_4/1"] == []
    assert all(r["delta"] > 0 for r in ib["rates"])
    # The next run compares with the reset's reading: +300 in an hour is judged again.
    ic.add_to_counter(root, "mlx5_4", "symbol_error", 300)
    report = fleet.run(T0 + 2 * HOUR, "2026-11-22T12:00:00+00:00", boots=boots)
    (row,) = rows(report, "symbol_error")
    assert (row["subject"], row["delta"], row["status"]) == ("mlx5_4/1", 300, FAIL)


def test_a_saturated_8_bit_counter_is_a_lower_bound_then_unknown(tmp_path):
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    root = fleet.roots[host]
    ic.set_counter(root, "mlx5_4", "link_downed", 250)
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    ic.set_counter(root, "mlx5_4", "link_downed", 255)     # stopped at 2**8 - 1: at least 5 more
    report = fleet.run(T0 + HOUR, "2026-11-22T11:00:00+00:00")
    (row,) = rows(report, "link_downed")
    assert (row["subject"], row["delta"], row["at_least"], row["status"]) == ("mlx5_4/1", 5, True, FAIL)
    report = fleet.run(T0 + 2 * HOUR, "2026-11-22T12:00:00+00:00")   # still 255: nothing can be told
    assert rows(report, "link_downed") == []
    unknown = [(u["subject"], u["counter"]) for u in section(report)["unknown"] if "saturated" in u["reason"]]
    assert ("mlx5_4/1", "link_downed") in unknown and ("mlx5_1/1", "link_downed") in unknown  # the recording's own 255


def test_an_unreadable_counter_is_not_zero_and_not_judged(tmp_path):
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    root = fleet.roots[host]
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    (ic.port_dir(root, "mlx5_4") / "counters/symbol_error").write_text("N/A (no PMA)\n")
    report = fleet.run(T0 + HOUR, "2026-11-22T11:00:00+00:00")
    record = [c for c in report["hosts"][host]["doctor"]["checks"] if c["id"] == "network.ib_counters"][0]
    assert record["status"] == WARN and "mlx5_4/1 symbol_error" in record["message"]
    assert ("mlx5_4/1", "symbol_error", "unreadable now") in [(u["subject"], u["counter"], u["reason"]) for u in section(report)["unknown"]]
    ic.set_counter(root, "mlx5_4", "symbol_error", 5000)   # readable again: the last run could not read it
    report = fleet.run(T0 + 2 * HOUR, "2026-11-22T12:00:00+00:00")
    assert rows(report, "symbol_error") == []
    assert ("mlx5_4/1", "symbol_error", "unreadable in the last run") in [
        (u["subject"], u["counter"], u["reason"]) for u in section(report)["unknown"]]


def test_a_flap_is_a_finding_that_lasts_and_clears_itself_after_three_clean_runs(tmp_path):
    from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import findings
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    root = fleet.roots[host]
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    ic.add_to_counter(root, "mlx5_6", "link_downed", 1)   # the link dropped and came back between runs
    report = fleet.run(T0 + HOUR, "2026-11-22T11:00:00+00:00")
    assert [(f["subject"], f["change"]) for f in section(report)["flaps"]] == [("mlx5_6/1", "link_downed +1")]
    assert {(f["check_id"], f["status"]) for f in section(report)["findings"]} == {
        ("interconnect.flap", WARN), ("interconnect.ib_errors", FAIL)}
    state = findings.update(findings.empty_state(), report)
    assert len(ours(state)) == 2
    assert all(f["open"] and f["subject"] == "mlx5_6/1" and f["clears_after"] == 3 for f in ours(state))
    for n, hour in enumerate((2, 3, 4), 1):
        report = fleet.run(T0 + hour * HOUR, "2026-11-22T1%d:00:00+00:00" % hour)
        assert section(report)["findings"] == []
        state = findings.update(state, report)
        assert all(f["clean_runs"] == n for f in ours(state))
        assert all(f["open"] == (n < 3) for f in ours(state))
    assert all(f["acknowledged"]["by"] == "continuum.hydra" and f["acknowledged"]["note"] == "cleared itself after 3 clean runs"
               for f in ours(state))
    assert findings.store_problem(state) is None
    # Seen again: it reopens.
    ic.set_port(root, "mlx5_6", state="1: DOWN", phys_state="2: Polling")
    report = fleet.run(T0 + 5 * HOUR, "2026-11-22T15:00:00+00:00")
    state = findings.update(state, report)
    (flap,) = [f for f in ours(state) if f["check_id"] == "interconnect.flap"]
    assert flap["open"] and flap["clean_runs"] == 0 and flap["message"] == "state ACTIVE -> DOWN since the last run"


def test_a_flap_clears_after_the_hosts_own_number_of_clean_runs_or_on_acknowledgement(tmp_path):
    from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import findings
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    expect = {"interconnect_clean_runs": 1}
    fleet.run(T0, "2026-11-22T10:00:00+00:00", expect=expect)
    ic.set_port(fleet.roots[host], "mlx5_7", state="1: DOWN", phys_state="3: Disabled")
    state = findings.update(findings.empty_state(), fleet.run(T0 + HOUR, "2026-11-22T11:00:00+00:00", expect=expect))
    (flap,) = ours(state)
    assert flap["clears_after"] == 1
    acked, closed = findings.acknowledge(state, [host], ["interconnect.flap"], "ops", "2026-11-22T11:30:00+00:00", "recabled")
    assert [f["subject"] for f in closed] == ["mlx5_7/1"] and not ours(acked)[0]["open"]
    ic.set_port(fleet.roots[host], "mlx5_7", state="4: ACTIVE", phys_state="5: LinkUp")   # up again: a flap too
    state = findings.update(state, fleet.run(T0 + 2 * HOUR, "2026-11-22T12:00:00+00:00", expect=expect))
    assert ours(state)[0]["open"] and ours(state)[0]["message"] == "state DOWN -> ACTIVE since the last run"
    state = findings.update(state, fleet.run(T0 + 3 * HOUR, "2026-11-22T13:00:00+00:00", expect=expect))
    assert not ours(state)[0]["open"] and ours(state)[0]["clean_runs"] == 1


def test_three_degradations_within_an_hour_escalate(tmp_path):
    from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import findings
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    state = findings.empty_state()
    for n, minute in enumerate((20, 40, 59), 1):
        ic.add_to_counter(fleet.roots[host], "mlx5_8", "port_rcv_errors", 13000)   # ~11 per second: over 10, a WARN
        report = fleet.run(T0 + minute * 60, "2026-11-22T10:%02d:00+00:00" % minute)
        state = findings.update(state, report)
        (item,) = [f for f in ours(state) if f["check_id"] == "interconnect.ib_errors"]
        assert item["status"] == WARN and item["subject"] == "mlx5_8/1"
        assert (item["escalation"] is not None) == (n == 3)
    assert item["escalation"]["level"] == 3 and "mlx5_8/1" in item["escalation"]["action"]
    assert "3 times within 0:39:00" in item["escalation"]["why"]


def test_a_port_down_or_slower_than_its_class_is_flagged_with_its_peers_named(tmp_path):
    fleet = Fleet(tmp_path, hosts=4)
    a, b, c, d = fleet.names
    ic.set_port(fleet.roots[d], "mlx5_4", state="1: DOWN", phys_state="2: Polling")
    ic.set_port(fleet.roots[c], "mlx5_5", rate="200 Gb/sec (4X HDR)")
    report = fleet.run(T0, "2026-11-22T10:00:00+00:00")
    peers = dict(((p["host"], p["subject"]), p) for p in section(report)["peers"])
    assert set(peers) == {(d, "mlx5_4/1"), (c, "mlx5_5/1")}
    down, slow = peers[(d, "mlx5_4/1")], peers[(c, "mlx5_5/1")]
    assert (down["problem"], down["status"], down["peers"], down["expected_rate_gbps"]) == ("DOWN", FAIL, [a, b, c], 400.0)
    assert (slow["problem"], slow["status"], slow["peers"]) == ("ACTIVE at 200 Gb/s", WARN, [a, b, d])
    messages = dict(((f["host"], f["subject"]), f["message"]) for f in section(report)["findings"])
    assert messages[(d, "mlx5_4/1")] == "mlx5_4/1 is DOWN while 3 of 4 hosts of class %s have it ACTIVE at 400 Gb/s (e.g. %s, %s, %s)" % (
        report["hosts"][d]["class"], a, b, c)
    # Three hosts are the least that say what a port should be.
    small = Fleet(tmp_path / "small", hosts=2)
    ic.set_port(small.roots[small.names[1]], "mlx5_4", state="1: DOWN")
    assert section(small.run(T0, "2026-11-22T10:00:00+00:00"))["peers"] == []


def test_nvlink_replay_and_crc_errors_and_a_driver_reload(tmp_path):
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    smi = dict(fleet_factory.recorded_smi("a100-sxm4-v12.xml"), gpus=[
        dict(fleet_factory.recorded_smi("a100-sxm4-v12.xml")["gpus"][0], **g) for g in fleet.fleet.hosts[host]["doctor"]["environment"]["gpus"][:1]])

    def run(when, stamp, text, driver="535.54.03"):
        record = ic.nvlink_check(smi, when, text)
        fleet.fleet.hosts[host]["doctor"] = ic.with_checks(fleet.fleet.hosts[host]["doctor"], driver_version=driver)
        return fleet.run(when, stamp, extra={host: [record]})

    run(T0, "2026-11-22T10:00:00+00:00", ic.nvlink_text())
    report = run(T0 + HOUR, "2026-11-22T11:00:00+00:00", ic.nvlink_text({(1, "Replay Errors"): 2, (17, "CRC Errors"): 40}))
    nv = sorted((r["subject"], r["counter"], r["delta"], r["status"]) for r in section(report)["rates"] if r["kind"] == "nvlink")
    uuid = smi["gpus"][0]["uuid"]
    assert nv == [("GPU 0 %s NVLink 1" % uuid, "replay_recovery", 2, FAIL), ("GPU 0 %s NVLink 17" % uuid, "crc", 40, WARN)]
    # 400,000 more CRC errors within 10 s: 40,000 per second, over DCGM's 100 per second.
    report = run(T0 + HOUR + 10, "2026-11-22T11:00:10+00:00", ic.nvlink_text({(1, "Replay Errors"): 2, (17, "CRC Errors"): 400040}))
    (row,) = [r for r in section(report)["rates"] if r["kind"] == "nvlink"]
    assert (row["counter"], row["rate"], row["unit"], row["status"]) == ("crc", 40000.0, "second", FAIL)
    # A new driver (the counters start again): the interval restarts.
    report = run(T0 + 2 * HOUR, "2026-11-22T12:00:00+00:00", ic.nvlink_text({(1, "Replay Errors"): 3}), driver="570.86.15")
    assert [r for r in section(report)["rates"] if r["kind"] == "nvlink"] == []
    assert [r["reason"] for r in section(report)["resets"] if r["kind"] == "nvlink"] == ["NVIDIA driver 535.54.03 -> 570.86.15"]


def test_a_gpu_whose_index_is_unknown_is_named_by_its_uuid_never_gpu_none(tmp_path):
    # The recorded `nvidia-smi nvlink -e` with its GPU's index unknown (a reader that gave none): the rate rows name the
    # GPU through _results.gpu_name, as every format does; it printed "GPU None (GPU-...)".
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvlink_errors import parse_nvlink_errors
    from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    base = fleet_factory.recorded_smi("a100-sxm4-v12.xml")
    smi = dict(base, gpus=[dict(base["gpus"][0], **dict(fleet.fleet.hosts[host]["doctor"]["environment"]["gpus"][0], index=None))])
    uuid = smi["gpus"][0]["uuid"]

    def run(when, stamp, text):
        gpus = parse_nvlink_errors(text, BadLines())
        for gpu in gpus:
            gpu.update(uuid=uuid, name=smi["gpus"][0]["name"], index=None)
        data = {"source": "nvidia-smi", "read_at": when, "gpus": gpus, "bad_lines": {"count": 0, "sample": []}}
        return fleet.run(when, stamp, extra={host: [ic.judge("gpu.nvlink_errors", nvidia_smi=ic.ok(smi), nvlink_errors=ic.ok(data))]})

    run(T0, "2026-11-22T10:00:00+00:00", ic.nvlink_text())
    report = run(T0 + HOUR, "2026-11-22T11:00:00+00:00", ic.nvlink_text({(1, "Replay Errors"): 2}))
    subjects = [r["subject"] for r in section(report)["rates"] if r["kind"] == "nvlink"]
    assert subjects == ["GPU %s NVLink 1" % uuid]


def test_an_nvlink_link_that_went_down_or_came_back_is_a_flap(tmp_path):
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvlink_status
    from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    base = fleet_factory.recorded_smi("a100-sxm4-v12.xml")
    smi = dict(base, gpus=[dict(base["gpus"][0], **fleet.fleet.hosts[host]["doctor"]["environment"]["gpus"][0])])
    status = read_fixture("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt")   # GPU 0: twelve links at 25 GB/s

    def run(when, stamp, text):
        links = parse_nvlink_status(text)
        links[0].update(uuid=smi["gpus"][0]["uuid"], index=0)
        state = ic.judge("gpu.nvlink", nvidia_smi=ic.ok(smi), nvlink=ic.ok({"source": "nvidia-smi", "gpus": links,
                                                                           "bad_lines": {"count": 0, "sample": []}}))
        return fleet.run(when, stamp, extra={host: [state, ic.nvlink_check(smi, when)]})

    run(T0, "2026-11-22T10:00:00+00:00", status)
    report = run(T0 + HOUR, "2026-11-22T11:00:00+00:00", status.replace("Link 3: 25 GB/s", "Link 3: <inactive>"))
    subject = "GPU 0 %s" % smi["gpus"][0]["uuid"]
    assert [(f["kind"], f["subject"], f["change"]) for f in section(report)["flaps"]] == [("nvlink", subject, "NVLink 3 down")]
    report = run(T0 + 2 * HOUR, "2026-11-22T12:00:00+00:00", status)
    assert [f["change"] for f in section(report)["flaps"]] == ["NVLink 3 up again"]
    assert [(f["check_id"], f["subject"]) for f in section(report)["findings"]] == [("interconnect.flap", subject)]


def test_pcie_aer_new_fatal_errors_fail_correctable_ones_warn_above_8_per_minute(tmp_path):
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    gpu = fleet.fleet.hosts[host]["doctor"]["environment"]["gpus"][0]
    address = "0000:%s" % gpu["pci_bus_id"].lower()[-7:]
    functions = [{"address": address, "kind": "gpu", "name": None}, {"address": "0000:9a:00.0", "kind": "nic", "name": "mlx5_4"}]
    root = ic.aer_root(tmp_path / "aer", host, [f["address"] for f in functions])
    smi = dict(fleet_factory.recorded_smi("a100-sxm4-v12.xml"), gpus=[dict(fleet_factory.recorded_smi("a100-sxm4-v12.xml")["gpus"][0], **gpu)])
    fleet.run(T0, "2026-11-22T10:00:00+00:00", extra={host: [ic.aer_check(root, functions, T0, smi)]})
    ic.set_aer(root, address, "correctable", 600, "RxErr")        # 600 in an hour: 10 per minute
    ic.set_aer(root, "0000:9a:00.0", "fatal", 1, "CmpltTO")
    report = fleet.run(T0 + HOUR, "2026-11-22T11:00:00+00:00", extra={host: [ic.aer_check(root, functions, T0 + HOUR, smi)]})
    aer = sorted((r["subject"], r["counter"], r["rate"], r["status"]) for r in section(report)["rates"] if r["kind"] == "aer")
    assert aer == [("%s (GPU 0)" % address, "correctable", 10.0, WARN), ("0000:9a:00.0 (mlx5_4)", "fatal", 1.0, FAIL)]
    statuses = dict((f["subject"], f["status"]) for f in section(report)["findings"] if f["check_id"] == "interconnect.pcie_aer")
    assert statuses == {"%s (GPU 0)" % address: WARN, "0000:9a:00.0 (mlx5_4)": FAIL}


def _fabric(smi_gpu, index, clique, cluster="5cd30dc8-1d1e-4f2a-9b6e-2f3c4d5e6f70", state="Completed"):
    gpu = dict(smi_gpu, index=index, fabric=dict(smi_gpu["fabric"], state=state, status="Success", clique_id=clique,
                                                 cluster_uuid=cluster, health_summary="Healthy", bandwidth="Full"))
    return gpu


def test_the_hosts_of_one_nvlink_domain_share_one_cluster_and_clique(tmp_path):
    fleet = Fleet(tmp_path, hosts=4)
    base = fleet_factory.recorded_smi("a100-sxm4-v12.xml")
    extra = {}
    for n, host in enumerate(fleet.names):
        clique = 7 if n < 3 else 9
        gpus = [_fabric(dict(base["gpus"][0], **g), g["index"], clique) for g in fleet.fleet.hosts[host]["doctor"]["environment"]["gpus"][:4]]
        record = ic.judge("gpu.fabric_state", {"nvlink_domain": "rack-12"}, nvidia_smi=ic.ok(dict(base, gpus=gpus)))
        assert record["status"] == PASS and "clique %d" % clique in record["message"]
        extra[host] = [record]
    report = fleet.run(T0, "2026-11-22T10:00:00+00:00", extra=extra)
    (off,) = section(report)["nvlink_domains"]["off"]
    assert (off["host"], off["seen"], off["expected_clique_id"], off["peers"]) == (
        fleet.names[3], "cluster 5cd30dc8-1d1e-4f2a-9b6e-2f3c4d5e6f70 clique 9", "7", fleet.names[:3])
    (group,) = section(report)["nvlink_domains"]["groups"]
    assert (group["domain"], group["hosts"], group["agreeing"]) == ("rack-12", 4, 3)
    (action,) = [a for a in report["actions"] if a["check_id"] == "interconnect.nvlink_domain"]
    assert action["hosts"] == [fleet.names[3]] and action["status"] == FAIL


def test_the_history_keeps_a_compact_reading_per_host_as_text_and_a_broken_one_is_a_first_reading(tmp_path):
    fleet = Fleet(tmp_path, hosts=2)
    fleet.run(T0, "2026-11-22T10:00:00+00:00")
    snap = fleet.snapshots[-1]
    text = snap["hosts"][fleet.names[0]]["interconnect"]
    assert isinstance(text, str) and len(text) < 1600  # nine ports, as recorded
    value = json.loads(text)
    assert set(value) == {"boot", "drv", "ib"}   # the thresholds are the defaults: not stored
    port = value["ib"]["p"]["mlx5_1/1"]
    # Only the judged counters that are not zero, the saturated ones named, nothing empty: no data or packet counters.
    assert port == {"s": "ACTIVE", "r": 400.0, "fw": "28.41.1000", "c": {"link_downed": 255, "excessive_buffer_overrun_errors": 15,
                                                                         "port_rcv_errors": 14},
                    "sat": ["excessive_buffer_overrun_errors", "link_downed"]}
    assert interconnect.reading_problem(value) is None and history.snapshot_problem(snap) is None
    fold = history.HistoryFold()
    fold.add(snap)
    assert fold.interconnect == dict((h, snap["hosts"][h]["interconnect"]) for h in fleet.names)   # the text, one per host
    # A reading whose content is broken: that host is judged as a first reading, and the report says why.
    value["ib"]["p"]["mlx5_1/1"]["c"]["link_downed"] = -1
    fleet.snapshots[-1]["hosts"][fleet.names[0]]["interconnect"] = interconnect.stored(value)
    report = fleet.run(T0 + HOUR, "2026-11-22T11:00:00+00:00")
    assert section(report)["hosts"] == {fleet.names[0]: "first reading", fleet.names[1]: "compared"}
    problem = "interconnect: the last reading of %s in the history is unusable (interconnect ib reading of 'mlx5_1/1': counters " \
              "of the wrong type); judged as a first reading" % fleet.names[0]
    assert section(report)["problems"] == [problem] and problem in report["analysis"]["problems"]
    wrong = json.loads(json.dumps(snap))
    wrong["hosts"][fleet.names[0]]["interconnect"] = {"ib": {}}
    assert history.snapshot_problem(wrong) == "host %r: interconnect reading of the wrong type" % fleet.names[0]
    tuned = Fleet(tmp_path / "tuned")
    tuned.run(T0, "2026-11-22T10:00:00+00:00", expect={"ib_symbol_error_per_hour": 60})
    assert json.loads(tuned.snapshots[-1]["hosts"][tuned.names[0]]["interconnect"])["lim"] == {"ib_symbol_error_per_hour": 60}


def test_no_interconnect_reading_no_section():
    fleet = fleet_factory.SyntheticFleet({"a100x8": 2})
    report = analyse(fleet.report(), AnalysisOptions())
    assert report["analysis"]["interconnect"] is None
    assert interconnect.analyse_interconnect(report["hosts"], {}) is None


@pytest.mark.parametrize("plant, problem", [
    (lambda gpu: gpu["c"].update(x=gpu["c"].pop("1")), "counters of links that are not link numbers ('x')"),
    (lambda gpu: gpu.update(u=["x"]), "unreadable links that are not link numbers ('x')"),
    (lambda gpu: gpu.update(down=["x"]), "down links that are not link numbers ('x')"),
])
def test_an_nvlink_reading_with_a_link_that_is_no_number_is_a_first_reading_not_a_crash(tmp_path, plant, problem):
    # Review: a stored reading naming NVLink "x" passed reading_problem(), then sorted(..., key=int) raised on every
    # later run: the whole fleet analysis failed.
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    smi = dict(fleet_factory.recorded_smi("a100-sxm4-v12.xml"), gpus=[
        dict(fleet_factory.recorded_smi("a100-sxm4-v12.xml")["gpus"][0], **fleet.fleet.hosts[host]["doctor"]["environment"]["gpus"][0])])
    text = ic.nvlink_text({(1, "Replay Errors"): 2})
    fleet.run(T0, "2026-11-22T10:00:00+00:00", extra={host: [ic.nvlink_check(smi, T0, text)]})
    value = json.loads(fleet.snapshots[-1]["hosts"][host]["interconnect"])
    ((uuid, gpu),) = value["nvlink"]["g"].items()
    plant(gpu)
    fleet.snapshots[-1]["hosts"][host]["interconnect"] = interconnect.stored(value)
    assert history.snapshot_problem(fleet.snapshots[-1]) is None   # the snapshot's shape is right: only its content is not
    report = fleet.run(T0 + HOUR, "2026-11-22T11:00:00+00:00", extra={host: [ic.nvlink_check(smi, T0 + HOUR, text)]})
    assert section(report)["hosts"] == {host: "first reading"}
    assert section(report)["problems"] == [
        "interconnect: the last reading of %s in the history is unusable (interconnect nvlink reading of %r: %s); judged as "
        "a first reading" % (host, uuid, problem)]


@pytest.mark.parametrize("listed", [True, False])
def test_nvlink_counters_of_a_gpu_named_by_its_bus_id_are_judged(tmp_path, listed):
    # Review: `nvidia-smi nvlink -e` naming a GPU by bus id ("GPU 00000000:01:00.0", recent drivers) left the stored
    # reading empty ({'g': {}}): that GPU's NVLink errors were never judged. It is matched to nvidia-smi's GPU by PCI
    # address; a GPU nvidia-smi does not list is kept under its address.
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvlink_errors import parse_nvlink_errors
    from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
    fleet = Fleet(tmp_path)
    host = fleet.names[0]
    base = fleet_factory.recorded_smi("a100-sxm4-v12.xml")
    smi = dict(base, gpus=[dict(base["gpus"][0], **fleet.fleet.hosts[host]["doctor"]["environment"]["gpus"][0])])
    address = smi["gpus"][0]["pci_bus_id"].lower() if listed else "00000000:b8:00.0"

    def run(when, stamp, text):
        text, n = re.subn(r"^GPU 0: .*$", "GPU %s" % address, text, flags=re.M)
        assert n == 1
        bad = BadLines()
        data = {"source": "nvidia-smi", "read_at": when, "gpus": parse_nvlink_errors(text, bad), "bad_lines": bad.as_dict()}
        return fleet.run(when, stamp, extra={host: [ic.judge("gpu.nvlink_errors", nvidia_smi=ic.ok(smi), nvlink_errors=ic.ok(data))]})

    run(T0, "2026-11-22T10:00:00+00:00", ic.nvlink_text())
    report = run(T0 + HOUR, "2026-11-22T11:00:00+00:00", ic.nvlink_text({(1, "Replay Errors"): 2}))
    named = "GPU 0 %s" % smi["gpus"][0]["uuid"] if listed else "GPU at 00000000:b8:00.0"
    assert [(r["subject"], r["counter"], r["delta"], r["status"]) for r in section(report)["rates"] if r["kind"] == "nvlink"] == [
        ("%s NVLink 1" % named, "replay_recovery", 2, FAIL)]
