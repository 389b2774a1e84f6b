"""Fleets as an ops engineer meets them, for the fleet report's first screen and its size at scale (issue 29).

``seven_hosts()``: 7 A100 hosts (a recorded ``nvidia-smi -q -x``) with four real faults, each judged by doctor's own
check on a copy of a real recording - an uncorrectable ECC error planted in the nvidia-smi recording (gpu-a01), a GPU
fallen off the bus at an address nvidia-smi no longer lists, which the kernel log names three times and never by
index (recorded Xid lines, gpu-a02), an Xid 48 on a GPU nvidia-smi lists (gpu-a03), a hung nvidia-smi (doctor's
run() with the probe timing out, gpu-a04) - and 23 warnings, one per host, check and GPU: the clock not synchronised
on every host doctor could read (6, recorded chronyc output), persistence mode off on two hosts' 8 GPUs (16, the
recording's own setting), a row remap and a contained ECC error on one GPU (1, recorded Xid 63 and 94 lines).

``scale_report(n)``: ``n`` hosts in 4 classes with the warnings of a real fleet - one fleet-wide (no time sync), a few
per cent with persistence mode off on every GPU, drift, stragglers, and rare faults (ECC FAIL, a lost GPU named by
address only, a hung nvidia-smi, unreachable hosts) - analysed, and its findings folded over three runs (one
acknowledgement between them) by the production functions, so the report carries ``findings`` and
``findings_timeline`` as the callback writes them.
"""

import copy
import random

from ansible_collections.continuum.hydra.plugins.module_utils import _results
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.system import parse_chronyc_tracking
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import findings
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.tests.support.envelopes import ok
from ansible_collections.continuum.hydra.tests.support.fleet import UNCORRECTABLE_ECC, fixture, plant
from ansible_collections.continuum.hydra.tests.support.fleet_factory import SyntheticFleet, check, judge, recorded_smi
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

SEVEN = ["gpu-a%02d" % n for n in range(1, 8)]
ECC_HOST, LOST_HOST, XID48_HOST, HUNG_HOST = SEVEN[:4]
LOST_ADDRESS = "0000:19:00"  # not one of the recording's GPUs: the kernel log gives no index for it
RUN_TIMES = ("2026-11-20T13:00:00+00:00", "2026-11-21T13:00:00+00:00", "2026-11-22T13:00:00+00:00")

_XID_LINES = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()
# Recorded NVRM lines: the Xid 119 (GSP timeout) at 0000:19:00, the Xid 63 (row remap) and the Xid 94 (contained ECC).
_XID_119 = [line for line in _XID_LINES if "(PCI:%s): 119" % LOST_ADDRESS in line][0]
_XID_63 = [line for line in _XID_LINES if "): 63," in line][0]
_XID_94 = [line for line in _XID_LINES if "): 94," in line][0]


def kernel_log(lines):
    """The kernel_log probe's envelope for these lines, built by the probe's own scan()."""
    return ok(dict(xid.scan("\n".join(lines)), source="journalctl", journal_problem=None, window_hours=24, window_applied=True))


def _readdressed(line, address, code=None):
    """A recorded Xid line moved to another GPU address (and another code): a copy of a real line, edited."""
    head, tail = line.split("(PCI:", 1)
    rest = tail.split(")", 1)[1]
    if code is not None:
        rest = ": %d,%s" % (code, rest.split(",", 1)[1])
    return "%s(PCI:%s)%s" % (head, address, rest)


def _unsynced_clock():
    data = parse_chronyc_tracking(read_fixture("hosts", "debian12-vm", "cmd/chronyc-tracking-unsynced.txt"))
    return judge("system.time_sync", time_sync=ok(dict(data, source="chronyc", tried={})))


_IDENTITY = ("index", "uuid", "serial", "pci_bus_id")


def _smi(fleet, host, recording=None):
    """The host's nvidia-smi data: the recording's GPU (or ``recording``'s) once per GPU of the host, each with the
    host's own identity (index, UUID, serial, address)."""
    smi = recorded_smi("a100-sxm4-v12.xml")
    first = (recording or smi)["gpus"][0]
    gpus = [dict(copy.deepcopy(first), **dict((k, own[k]) for k in _IDENTITY)) for own in fleet.hosts[host]["doctor"]["environment"]["gpus"]]
    return dict(smi, gpus=gpus)


def _ecc_fail(fleet, host, index=3):
    """gpu.ecc_errors on the host's GPUs, GPU ``index`` carrying the uncorrectable ECC count planted in the recording."""
    smi = _smi(fleet, host)
    smi["gpus"][index] = _smi(fleet, host, parse_nvidia_smi(plant(fixture("a100-sxm4-v12.xml"), UNCORRECTABLE_ECC)))["gpus"][index]
    return judge("gpu.ecc_errors", nvidia_smi=ok(smi))


def _xids(fleet, host, lines):
    return judge("gpu.xid_errors", nvidia_smi=ok(_smi(fleet, host)), kernel_log=kernel_log(lines))


def _hung(host):
    """doctor's own result for a host whose nvidia-smi hangs: the root cause and the checks it blocked."""
    def absent(options):
        raise ProbeAbsent("not on this host")

    def hung(options):
        raise ProbeError("nvidia-smi -q -x timed out after 30 s")
    table = dict((name, absent) for name in probe_catalogue.PROBES)
    table.update(host=lambda options: {"hostname": host}, nvidia_smi=hung)
    return _doctor.run(only=["driver", "gpu"], exclude=["gpu.xid_errors"], probes=table)


def _replace(doctor, *records):
    """The doctor result with these check records in place of its checks of the same ids (added when absent)."""
    ids = set(r["id"] for r in records)
    doctor["checks"] = [c for c in doctor["checks"] if c["id"] not in ids] + list(records)
    doctor["summary"] = _results.summarize(doctor["checks"])


def seven_hosts():
    """The analysed 7-host report with its findings (one run): see the module docstring."""
    fleet = SyntheticFleet({"a100x8": 7}, seed=29, cv=0.01)
    renamed = dict(zip(fleet.names("a100x8"), SEVEN))
    fleet.hosts = dict((renamed[old], record) for old, record in fleet.hosts.items())
    clock = _unsynced_clock()
    for host in SEVEN:
        _replace(fleet.hosts[host]["doctor"], copy.deepcopy(clock))
    for host in SEVEN[4:6]:
        _replace(fleet.hosts[host]["doctor"], judge("gpu.persistence_mode", nvidia_smi=ok(_smi(fleet, host))))
    _replace(fleet.hosts[ECC_HOST]["doctor"], _ecc_fail(fleet, ECC_HOST))
    lost = [_XID_119, _readdressed(_XID_LINES[1], LOST_ADDRESS), _readdressed(_XID_119, LOST_ADDRESS, code=45)]
    _replace(fleet.hosts[LOST_HOST]["doctor"], _xids(fleet, LOST_HOST, lost))
    dbe = _readdressed(_XID_LINES[1], "0000:30:00", code=48)  # GPU 2 of the host (00000000:30:00.0)
    _replace(fleet.hosts[XID48_HOST]["doctor"], _xids(fleet, XID48_HOST, [dbe]))
    remapped = [_readdressed(_XID_63, "0000:10:00"), _readdressed(_XID_94, "0000:10:00")]
    _replace(fleet.hosts[SEVEN[6]]["doctor"], _xids(fleet, SEVEN[6], remapped))
    fleet.hosts[HUNG_HOST]["doctor"] = _hung(HUNG_HOST)
    report = analyse(fleet.report(RUN_TIMES[-1]), AnalysisOptions(history=[]))
    state = findings.update(findings.empty_state(), report)
    report.update(findings=findings.listing(state), findings_timeline=findings.timeline(state))
    return report


# ---------------------------------------------------------------- at scale

SHARES = {"a100x8": 0.4, "a10gx4": 0.3, "t4x1": 0.2, "ada4000x2": 0.1}


def scale_fleet(n, seed=29):
    """(fleet, unreachable hosts): n hosts with the warnings and faults of the module docstring, drawn with ``seed``."""
    fleet = SyntheticFleet(dict((name, int(round(n * share))) for name, share in SHARES.items()), seed=seed, cv=0.02)
    rng = random.Random(seed)
    names = sorted(fleet.hosts)
    clock = _unsynced_clock()
    for host in names:
        record = fleet.hosts[host]
        _replace(record["doctor"], copy.deepcopy(clock))
        refs = [_results.gpu_ref(g) for g in record["doctor"]["environment"]["gpus"]]
        roll = rng.random()
        if roll < 0.03:
            _replace(record["doctor"], check("gpu.persistence_mode", "WARN", gpus=refs, remediation="nvidia-smi -pm 1"))
        elif roll < 0.035:
            _replace(record["doctor"], check("gpu.ecc_errors", "FAIL", gpus=refs[-1:],
                                             remediation="drain the node, reset the GPU, replace it if the errors come back"))
        elif roll < 0.037:
            lost = {"index": None, "pci_bus_id": LOST_ADDRESS, "uuid": None, "name": None}
            _replace(record["doctor"], check("gpu.xid_errors", "FAIL", gpus=[dict(lost, xid=79), dict(lost, xid=45)],
                                             remediation="drain the node and power-cycle it"))
        elif roll < 0.038:
            record["doctor"] = _hung(host)
        if rng.random() < 0.01:
            fleet.set_env(host, "driver_version", "535.54.03")
        if rng.random() < 0.01:
            fleet.slow_host(host, rng.uniform(0.7, 0.85), "triad_gbps")
    unreachable = names[::max(1, n // 5)][1:]  # a handful, spread over the classes
    return fleet, unreachable


def scale_report(n, seed=29):
    """The analysed report of scale_fleet(n) with its findings folded over three runs (RUN_TIMES): after the first,
    persistence mode is fixed where it was off and those findings acknowledged; before the last, one more GPU fails."""
    fleet, unreachable = scale_fleet(n, seed)
    state = findings.empty_state()
    report = None
    for run, when in enumerate(RUN_TIMES):
        if run == 1:
            fixed = [h for h in sorted(fleet.hosts) if h not in unreachable and any(
                c["id"] == "gpu.persistence_mode" and c["status"] == "WARN" for c in fleet.hosts[h]["doctor"]["checks"])]
            for host in fixed:
                _replace(fleet.hosts[host]["doctor"], check("gpu.persistence_mode"))
            if fixed:
                state = findings.acknowledge(state, fixed, ["gpu.persistence_mode"], "ops", "2026-11-20T18:00:00+00:00",
                                             "persistence mode on")[0]
        if run == 2:
            host = sorted(fleet.hosts)[-1]
            refs = [_results.gpu_ref(g) for g in fleet.hosts[host]["doctor"]["environment"]["gpus"]]
            _replace(fleet.hosts[host]["doctor"], check("gpu.ecc_errors", "FAIL", gpus=refs[:1], remediation="drain the node"))
        collector = FleetCollector()
        for host in sorted(fleet.hosts):
            if host in unreachable:
                collector.add_unreachable(host, "ssh: connect to host %s port 22: Connection timed out" % host)
            else:
                collector.add_doctor(host, fleet.hosts[host]["doctor"])
                collector.add_profile(host, fleet.hosts[host]["profile"])
        report = analyse(collector.build(when, "doctor.yml"), AnalysisOptions(history=[]))
        state = findings.update(state, report)
    report.update(findings=findings.listing(state), findings_timeline=findings.timeline(state))
    return report
