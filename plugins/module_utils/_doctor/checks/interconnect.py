# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Checks of the interconnect counters: InfiniBand/RoCE ports, NVLink links, PCIe AER; the GPUs' NVLink fabric.

A counter read once says how many errors happened since it was last cleared, not how fast they come: the
fleet report compares each host's counters with its previous run and judges the rates
(plugin_utils/_fleet/interconnect.py, docs/interconnect.md). These checks hand over the raw counters with the
time of the reading and the host's thresholds (hydra_expect, resolved here), and report the lifetime totals as
information: unreadable counters, and saturated ones, are what a single run can judge.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_name, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_OK, SKIP, WARN

# The thresholds each check hands to the fleet report, by the hydra_expect key that sets them (each key named in an
# _expect.key() call of its own: tests/unit/.../test_expect.py reads them from the source).
CLEAN_RUNS = _expect.key("interconnect_clean_runs")
IB_THRESHOLDS = (_expect.key("ib_symbol_error_per_hour"), _expect.key("ib_link_downed_max"),
                 _expect.key("ib_link_error_recovery_per_minute"), _expect.key("ib_port_rcv_errors_per_second"),
                 _expect.key("ib_port_xmit_discards_per_second"), CLEAN_RUNS)
NVLINK_THRESHOLDS = (_expect.key("nvlink_crc_errors_per_second"), _expect.key("nvlink_replay_recovery_max"), CLEAN_RUNS)
AER_THRESHOLDS = (_expect.key("pcie_aer_correctable_per_minute"), CLEAN_RUNS)
IB_DEVICES = _expect.key("ib_devices")
NVLINK_DOMAIN = _expect.key("nvlink_domain")
# How many non-zero lifetime counters a message names (the details have them all).
NAMED = 3
SATURATED_ADVICE = ("Clear the saturated port's counters (`perfquery -x -R -C <device> -P <port>`, infiniband-diags) so that "
                    "new errors show; the fleet report cannot tell a rate while a counter is stuck at its maximum.")
UNREADABLE_ADVICE = "Read the counter files named in details by hand: an error counter that cannot be read is not zero."


def thresholds(expect: Expect, keys: Iterable[str]) -> tuple[dict[str, Any], Optional[str]]:
    """The host's thresholds ({key: value}) and None, or ({}, one line naming a value that is not >= 0)."""
    values = dict((key, _expect.get(expect, key)) for key in keys)
    for key, value in values.items():
        if value < 0 or (key == "interconnect_clean_runs" and value < 1):
            least = 1 if key == "interconnect_clean_runs" else 0
            return {}, "expect.%s: %r is below %d; accepted: a number >= %d" % (key, value, least, least)
    return values, None


def _nonzero(named: Iterable[tuple[str, Mapping[str, int]]]) -> list[str]:
    """'mlx5_0/1 symbol_error 12' for each non-zero counter, biggest first."""
    found = sorted(((value, "%s %s %d" % (where, name, value)) for where, counters in named
                    for name, value in counters.items() if value), key=lambda item: -item[0])
    return [text for _value, text in found]


def _lifetime(phrases: list[str], total_things: str) -> str:
    if not phrases:
        return "%s; every error counter reads 0" % total_things
    more = " (and %d more)" % (len(phrases) - NAMED) if len(phrases) > NAMED else ""
    return "%s; lifetime errors (information: the fleet report judges the rates across runs): %s%s" % (
        total_things, ", ".join(phrases[:NAMED]), more)


# ---------------------------------------------------------------- InfiniBand / RoCE

@check("network.ib_counters", "InfiniBand / RoCE port error counters", requires=("ib_counters",))
def ib_counters(probes: Probes, expect: Expect) -> Finding:
    """Reads the error counters (counters/: symbol_error, link_error_recovery, link_downed, port_rcv_errors,
    port_xmit_discards, local_link_integrity_errors, excessive_buffer_overrun_errors...; hw_counters/:
    rnr_nak_retry_err, local_ack_timeout_err, roce_slow_restart...), state and rate of every port under
    /sys/class/infiniband (only the devices in `ib_devices` when set), with the time of the reading.

    The counters count since they were last cleared: the fleet report turns two runs into rates and judges
    them (docs/interconnect.md; thresholds `ib_symbol_error_per_hour`, `ib_link_downed_max`...). Here the
    lifetime totals are information: PASS naming the non-zero ones. WARN when a counter cannot be read
    (unreadable is not zero) or is saturated (a PortCounters counter stops at its maximum, 255 for
    link_downed: new errors are invisible until the counters are cleared). ERROR for a threshold below 0;
    SKIP without RDMA ports.
    Remediation: clear a saturated port's counters with `perfquery -x -R -C <device> -P <port>` so new errors show.
    """
    limits, problem = thresholds(expect, IB_THRESHOLDS)
    if problem:
        return finding(ERROR, problem, remediation="Set the hydra_expect value to a number >= 0.")
    data = probes["ib_counters"]["data"]
    wanted = _expect.get(expect, IB_DEVICES)
    ports = [p for p in data["ports"] if not wanted or p["device"] in wanted]
    if not ports:
        return finding(SKIP, "none of the ib_devices (%s) is under /sys/class/infiniband" % ", ".join(wanted))
    details = {"read_at": data["read_at"], "ports": ports, "thresholds": limits}
    names = [("%s/%s" % (p["device"], p["port"]), p["counters"]) for p in ports]
    unreadable = ["%s/%s %s" % (p["device"], p["port"], name) for p in ports for name in sorted(p["unreadable"])]
    saturated = ["%s/%s %s" % (p["device"], p["port"], name) for p in ports for name in p["saturated"]]
    summary = _lifetime(_nonzero(names), "%d port(s) read" % len(ports))
    if unreadable:
        return finding(WARN, "%d counter(s) unreadable: %s; %s" % (len(unreadable), ", ".join(unreadable[:NAMED]), summary),
                       details, UNREADABLE_ADVICE)
    if saturated:
        return finding(WARN, "saturated (stuck at the maximum): %s; %s" % (", ".join(saturated[:NAMED]), summary), details,
                       SATURATED_ADVICE)
    return finding(PASS, summary, details)


# ---------------------------------------------------------------- NVLink

def _identities(gpu: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """What a GPU is known by, surest first: UUID, PCI address (`nvidia-smi nvlink -e` names a GPU by its bus id on
    recent drivers), index; only the ones the record has."""
    found = [("uuid", gpu.get("uuid")), ("pci", pci_key(gpu.get("pci_bus_id"))), ("index", gpu.get("index"))]
    return [(kind, value) for kind, value in found if value is not None and value != ""]


@check("gpu.nvlink_errors", "NVLink error counters", requires=("nvidia_smi", "nvlink_errors"))
def nvlink_errors(probes: Probes, expect: Expect) -> Finding:
    """Reads the NVLink error counters of every GPU and link (NVML: replay, recovery, CRC flit, CRC data; else
    `nvidia-smi nvlink -e`: Replay, Recovery, CRC Errors), with the time of the reading.

    The fleet report judges the increases across runs (DCGM's health rule: any replay or recovery error
    FAILs, CRC errors WARN and FAIL from `nvlink_crc_errors_per_second`; docs/interconnect.md). Here the
    lifetime totals are information: PASS naming the non-zero ones; WARN when a counter cannot be read;
    ERROR for a threshold below 0; SKIP on GPUs without NVLink.
    Remediation: read the counter by hand (`nvidia-smi nvlink -e -i <index>`): unreadable is not zero.
    """
    limits, problem = thresholds(expect, NVLINK_THRESHOLDS)
    if problem:
        return finding(ERROR, problem, remediation="Set the hydra_expect value to a number >= 0.")
    data = probes["nvlink_errors"]["data"]
    known: dict[tuple[str, Any], Mapping[str, Any]] = {}
    for smi_gpu in probes["nvidia_smi"]["data"]["gpus"]:
        for identity in _identities(smi_gpu):
            known.setdefault(identity, smi_gpu)
    readings: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    named: list[tuple[str, Mapping[str, int]]] = []
    for linked in data["gpus"]:
        gpu = next((known[identity] for identity in _identities(linked) if identity in known), linked)
        ref = gpu_ref(gpu)
        errors = dict((link, dict((k, v) for k, v in counters.items() if v)) for link, counters in linked["links"].items())
        readings.append(dict(ref, links=sorted(linked["links"], key=int),
                             errors=dict((link, c) for link, c in errors.items() if c), unreadable=linked["unreadable"]))
        named.extend(("%s NVLink %s" % (gpu_name(ref), link), c) for link, c in errors.items())
        if linked["unreadable"]:
            problems.append(dict(ref, unreadable=linked["unreadable"]))
    details = {"read_at": data["read_at"], "source": data["source"], "readings": readings, "thresholds": limits,
               "gpus": problems or [dict((k, r[k]) for k in ("index", "pci_bus_id", "uuid", "name")) for r in readings]}
    summary = _lifetime(_nonzero(named), "%d GPU(s) read (%s)" % (len(readings), data["source"]))
    if problems:
        first = problems[0]
        message = "counters unreadable on %d GPU(s): %s %s; %s" % (
            len(problems), gpu_name(first), ", ".join(sorted(first["unreadable"])[:NAMED]), summary)
        return finding(WARN, message, details,
                       "Read the counters by hand (`nvidia-smi nvlink -e -i <index>`): unreadable is not zero.")
    return finding(PASS, summary, details)


# ---------------------------------------------------------------- PCIe AER

@check("system.pcie_aer", "PCIe AER errors of the GPUs and NICs", requires=("pcie_aer",), uses=("nvidia_smi",))
def pcie_aer(probes: Probes, expect: Expect) -> Finding:
    """Reads the PCIe AER counters (aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal under
    /sys/bus/pci/devices) of every GPU, NVSwitch and RDMA NIC, with the time of the reading.

    They count since boot: the fleet report judges the increases across runs (docs/interconnect.md: any new
    non-fatal or fatal error FAILs, correctable errors WARN above `pcie_aer_correctable_per_minute`). Here
    the totals are information: PASS naming the non-zero ones; WARN when a file cannot be read or has no
    TOTAL line; ERROR for a threshold below 0; SKIP without such a device or without AER statistics.
    Remediation: read the files named in details by hand: unreadable is not zero.
    """
    limits, problem = thresholds(expect, AER_THRESHOLDS)
    if problem:
        return finding(ERROR, problem, remediation="Set the hydra_expect value to a number >= 0.")
    data = probes["pcie_aer"]["data"]
    smi = probes.get("nvidia_smi") or {}
    gpus = dict((pci_key(g.get("pci_bus_id")), g) for g in ((smi.get("data") or {}).get("gpus") or [])) \
        if smi.get("status") == READ_OK else {}
    devices = []
    for device in data["devices"]:
        gpu = gpus.get(pci_key(device["address"]))
        devices.append(dict(device, gpu_index=gpu.get("index") if gpu else None, gpu_uuid=gpu.get("uuid") if gpu else None))
    details = {"read_at": data["read_at"], "devices": devices, "without_aer": data["without_aer"], "thresholds": limits}

    def label(device: Mapping[str, Any]) -> str:
        what = "GPU %s" % device["gpu_index"] if device["gpu_index"] is not None else device["name"] or device["kind"]
        return "%s (%s)" % (device["address"], what)
    named = [(label(d), dict((s, d[s]) for s in ("correctable", "nonfatal", "fatal") if d[s])) for d in devices]
    summary = _lifetime(_nonzero(named), "%d device(s) read" % len(devices))
    unreadable = ["%s %s" % (label(d), s) for d in devices for s in sorted(d["unreadable"])]
    if unreadable:
        return finding(WARN, "%d AER file(s) unreadable: %s; %s" % (len(unreadable), ", ".join(unreadable[:NAMED]), summary),
                       details, UNREADABLE_ADVICE)
    return finding(PASS, summary, details)


# ---------------------------------------------------------------- multi-node NVLink fabric

# The cluster UUID of a GPU in no multi-node NVLink domain: HGX H100 and B200 GPUs (one node's NVSwitches) report
# state Completed, status Success, clique 0 and this UUID (tests/fixtures/k8s-test-infra/).
NO_CLUSTER = "00000000-0000-0000-0000-000000000000"
# The fabric health conditions beside summary and bandwidth, each True while it holds; driver 570 writes only these.
FABRIC_CONDITIONS = (("route_recovery", "route recovery in progress"), ("route_unhealthy", "route unhealthy"),
                     ("access_timeout_recovery", "access timeout recovery"))


def _fabric_faults(row: Mapping[str, Any]) -> list[str]:
    """What the GPU's fabric health block reports wrong: an Unhealthy or Limited Capacity summary, Degraded
    bandwidth, a condition that holds, a configuration fault; empty when none."""
    faults = [label for key, label in FABRIC_CONDITIONS if row[key] is True]
    if row["incorrect_configuration"] not in (None, "None"):
        faults.append("incorrect configuration %s" % row["incorrect_configuration"])
    if faults or row["health_summary"] in ("Unhealthy", "Limited Capacity") or row["bandwidth"] == "Degraded":
        return ["%s, bandwidth %s" % (row["health_summary"] or "no summary", row["bandwidth"] or "N/A")] + faults
    return []


@check("gpu.fabric_state", "NVLink fabric state (GB200/GB300)", requires=("nvidia_smi",), uses=("nvidia_pci",))
def fabric_state(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's NVLink fabric block from `nvidia-smi -q -x` (driver 550+): state, status, clique id,
    cluster UUID and health (summary, bandwidth, the route and access-timeout conditions, configuration).

    On hosts whose GPUs join a multi-node NVLink fabric (GB200/GB300 NVL racks: no NVSwitch on the host's
    PCI bus): FAIL when a GPU's fabric state is not Completed or its status not Success (the status is the
    fabric probe's NVML result: `Insufficient Resources` is a failed registration, not an unreadable value);
    WARN when its health summary is Unhealthy or Limited Capacity, its bandwidth Degraded, a route recovery,
    unhealthy route or access-timeout recovery holds, or its configuration is reported incorrect, and when the
    host's GPUs disagree on the clique id or cluster UUID. PASS otherwise, naming the cluster and clique. The
    fleet report then requires one cluster UUID and one clique id across the hosts of one `nvlink_domain` (a
    rack group). A cluster UUID of all zeros is a GPU in no multi-node domain: SKIP (a single-node NVLink
    fabric, e.g. HGX H100 or B200 seen without its NVSwitches), FAIL when the host has an `nvlink_domain`.
    SKIP when no GPU reports a fabric state, and on NVSwitch hosts (gpu.fabric_manager judges those).
    Remediation: check the IMEX / NVLink fabric service of the rack (`nvidia-smi -q | grep -A8 Fabric`), then reset the GPUs.
    """
    gpus = probes["nvidia_smi"]["data"]["gpus"]
    pci = probes.get("nvidia_pci") or {}
    if pci.get("status") == READ_OK and (pci.get("data") or {}).get("nvswitches"):
        return finding(SKIP, "an NVSwitch host: gpu.fabric_manager judges its GPUs' fabric state")
    reporting = [g for g in gpus if (g.get("fabric") or {}).get("state") is not None]
    if not reporting:
        return finding(SKIP, "no GPU reports an NVLink fabric state (not a multi-node NVLink system, or a driver before 550)")
    fields = ("state", "status", "clique_id", "cluster_uuid", "health_summary", "bandwidth",
              "incorrect_configuration") + tuple(key for key, _label in FABRIC_CONDITIONS)
    rows = [dict(gpu_ref(g), **dict((k, g["fabric"].get(k)) for k in fields)) for g in reporting]
    domain = _expect.get(expect, NVLINK_DOMAIN)
    remedy = ("Check the rack's NVLink fabric service (IMEX and the NVLink switch trays' fabric manager), read "
              "`nvidia-smi -q | grep -A8 Fabric`, then reset the GPUs.")
    untrained = [r for r in rows if r["state"] != "Completed" or r["status"] not in (None, "Success")]
    if untrained:
        named = "; ".join("GPU %s state %s, status %s" % (r["index"], r["state"], r["status"]) for r in untrained[:NAMED])
        return finding(FAIL, "%d GPU(s) not on the NVLink fabric: %s" % (len(untrained), named),
                       {"gpus": untrained, "nvlink_domain": domain}, remedy)
    unclustered = [r for r in rows if r["cluster_uuid"] == NO_CLUSTER]
    if unclustered and domain:
        return finding(FAIL, "%d GPU(s) in no NVLink domain (cluster UUID %s, clique %s) on a host of NVLink domain %s: GPU %s" % (
            len(unclustered), NO_CLUSTER, unclustered[0]["clique_id"], domain, ", ".join(str(r["index"]) for r in unclustered)),
            {"gpus": unclustered, "nvlink_domain": domain}, remedy)
    unhealthy = [dict(r, faults=faults) for r, faults in ((r, _fabric_faults(r)) for r in rows) if faults]
    details = {"gpus": rows, "nvlink_domain": domain}
    if unhealthy:  # before the single-node SKIP: an HGX host's fabric health is still the GPUs' own report
        named = "; ".join("GPU %s %s" % (r["index"], ", ".join(r["faults"])) for r in unhealthy[:NAMED])
        return finding(WARN, "fabric health of %d GPU(s): %s" % (len(unhealthy), named), dict(details, gpus=unhealthy), remedy)
    if len(unclustered) == len(rows):
        return finding(SKIP, "%d GPU(s) on a single-node NVLink fabric (cluster UUID %s): not a multi-node NVLink system" % (
            len(rows), NO_CLUSTER))
    clusters = sorted(set(str(r["cluster_uuid"]) for r in rows))
    cliques = sorted(set(str(r["clique_id"]) for r in rows))
    if len(clusters) > 1 or len(cliques) > 1:
        return finding(WARN, "the host's GPUs disagree: cluster UUID %s, clique %s" % (" / ".join(clusters), " / ".join(cliques)),
                       details, remedy)
    return finding(PASS, "%d GPU(s) on the NVLink fabric: cluster %s, clique %s%s" % (
        len(rows), clusters[0], cliques[0], ", NVLink domain %s" % domain if domain else ""), details)
