"""Interconnect counters of simulated hosts, read by the collection's own probes and checks from recorded trees.

Each host's InfiniBand ports are GPUd's recorded H100 /sys/class/infiniband tree (tests/fixtures/gpud) laid out under a
directory of its own; its NVLink counters a copy of a recorded `nvidia-smi nvlink -e` (tests/fixtures/ml-engineering);
its AER files copies of procfs' recorded aer_dev_* files. Counter deltas, resets and state changes are planted by
editing those copies between runs; the time of a reading is planted in the probe's data (``read_at``), so that a
test says how far apart two runs were. The probe data goes through the real check (registry.evaluate), and the check
record into the host's doctor result.
"""

import json
import os
import re

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import interconnect as probes
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvlink_errors import parse_nvlink_errors
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
from ansible_collections.continuum.hydra.plugins.module_utils._host.pcie_aer import read_aer
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_ABSENT
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.tests.support import fleet_factory
from ansible_collections.continuum.hydra.tests.support.envelopes import ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.host_tree import lay_out_dump

IB_DUMP = "gpud/sys-class-infiniband-h100.txt"
NVLINK_E = ("ml-engineering", "nvidia-smi-nvlink-e-h100.txt")
AER_FILES = ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal")
OPTIONS = {"timeouts": {"command": 10, "nvidia_smi": 10}}
T0 = 1_800_000_000.0  # the first reading's Unix time in the tests
HOUR = 3600.0


def ib_root(base, host):
    """The recorded InfiniBand tree laid out under base/host (a copy the test edits)."""
    root = base / host
    lay_out_dump(root, IB_DUMP)
    return root


def port_dir(root, device, port=1):
    return root / "sys/class/infiniband" / device / "ports" / str(port)


def set_counter(root, device, name, value, port=1):
    """Write a counter file of the copy (counters/ or hw_counters/, wherever the recording has it)."""
    for folder in ("counters", "hw_counters"):
        path = port_dir(root, device, port) / folder / name
        if path.exists():
            path.write_text("%s\n" % value)
            return
    raise AssertionError("the recording has no counter %s on %s" % (name, device))


def get_counter(root, device, name, port=1):
    for folder in ("counters", "hw_counters"):
        path = port_dir(root, device, port) / folder / name
        if path.exists():
            return int(path.read_text())
    raise AssertionError("the recording has no counter %s on %s" % (name, device))


def add_to_counter(root, device, name, delta, port=1):
    set_counter(root, device, name, get_counter(root, device, name, port) + delta, port)


def set_port(root, device, state=None, phys_state=None, rate=None, port=1):
    directory = port_dir(root, device, port)
    for name, value in (("state", state), ("phys_state", phys_state), ("rate", rate)):
        if value is not None:
            (directory / name).write_text(value + "\n")


def judge(check_id, expect=None, **envelopes):
    """One catalogue check run by the registry on the given envelopes; every other probe it reads is absent."""
    (chk,) = [c for c in CATALOGUE if c.id == check_id]
    absent = {"status": READ_ABSENT, "data": None, "reason": "not on this host", "duration_ms": 0.0}
    return registry.evaluate(chk, dict((name, envelopes.get(name, absent)) for name in chk.probes), expect or {})


def ib_check(root, read_at, expect=None):
    """network.ib_counters of the tree under root, read by the real probe, the reading dated read_at."""
    data = probes.probe_ib_counters(OPTIONS, root=str(root))
    data["read_at"] = read_at
    return judge("network.ib_counters", expect, ib_counters=ok(data))


def nvlink_text(errors=None):
    """The recorded `nvidia-smi nvlink -e` with counts planted: errors={(link, "Replay Errors"): count}."""
    text = read_fixture(*NVLINK_E)
    for (link, label), count in (errors or {}).items():
        text, n = re.subn(r"(Link %d: %s: )\d+" % (link, re.escape(label)), r"\g<1>%d" % count, text)
        assert n == 1, "planting failed: link %d %s" % (link, label)
    return text


def nvlink_check(smi, read_at, text=None, expect=None):
    """gpu.nvlink_errors of a recorded `nvidia-smi nvlink -e` (its GPU 0 given the host's first GPU's identity)."""
    bad = BadLines()
    gpus = parse_nvlink_errors(text if text is not None else nvlink_text(), bad)
    first = smi["gpus"][0]
    for gpu in gpus:
        gpu.update(uuid=first["uuid"], name=first["name"])
    data = {"source": "nvidia-smi", "read_at": read_at, "gpus": gpus, "bad_lines": bad.as_dict()}
    return judge("gpu.nvlink_errors", expect, nvidia_smi=ok(smi), nvlink_errors=ok(data))


def aer_root(base, host, addresses):
    """Recorded AER files copied under base/host/sys/bus/pci/devices/<address>/ for each address."""
    root = base / host
    for address in addresses:
        directory = root / "sys/bus/pci/devices" / address
        directory.mkdir(parents=True, exist_ok=True)
        for name in AER_FILES:
            (directory / name).write_text(read_fixture("procfs", "aer-01.00.0", name))
    return root


def set_aer(root, address, severity, total, line=None):
    """Set a copy's TOTAL_ERR_* count (and one error line's count to the same) in aer_dev_<severity>."""
    path = root / "sys/bus/pci/devices" / address / ("aer_dev_%s" % severity)
    text = path.read_text()
    text, n = re.subn(r"(TOTAL_ERR_\w+ )\d+", r"\g<1>%d" % total, text)
    assert n == 1
    if line:
        text, n = re.subn(r"^(%s )\d+$" % re.escape(line), r"\g<1>%d" % total, text, flags=re.M)
        assert n == 1
    path.write_text(text)


def aer_check(root, functions, read_at, smi=None):
    """system.pcie_aer of the copies under root for functions [{address, kind, name}], read by the real reader."""
    data = read_aer(os.path.join(str(root), "sys/bus/pci/devices"), functions, 10)
    data["read_at"] = read_at
    envelopes = {"pcie_aer": ok(data)}
    if smi is not None:
        envelopes["nvidia_smi"] = ok(smi)
    return judge("system.pcie_aer", **envelopes)


def with_checks(doctor, *records, boot_id=None, driver_version=None):
    """A copy of a doctor result with the interconnect check records put in (replacing ones of the same id)."""
    ids = {r["id"] for r in records}
    out = dict(doctor, checks=[c for c in doctor["checks"] if c["id"] not in ids] + list(records))
    out["environment"] = dict(doctor["environment"])
    if boot_id is not None:
        out["environment"]["boot_id"] = boot_id
    if driver_version is not None:
        out["environment"]["driver_version"] = driver_version
    return out


def ours(state):
    """The interconnect findings of a findings state (doctor's own WARN of the recording's saturated counters aside)."""
    return [f for f in state["findings"] if f["check_id"].startswith("interconnect.")]


class Fleet:
    """Hosts of one class (the synthetic fleet's A100 hosts) whose interconnect is read from trees under tmp_path."""

    def __init__(self, tmp_path, hosts=1):
        self.base = tmp_path
        self.fleet = fleet_factory.SyntheticFleet({"a100x8": hosts})
        self.names = self.fleet.names("a100x8")
        self.roots = dict((h, ib_root(tmp_path, h)) for h in self.names)
        self.snapshots = []

    def run(self, when, generated_at, boots=None, expect=None, extra=None):
        """One run: every host's network.ib_counters read now (dated ``when``), analysed with the history so far;
        the run's snapshot goes through JSON into the history, as the callback writes it."""
        for host in self.names:
            doctor = self.fleet.hosts[host]["doctor"]
            records = [ib_check(self.roots[host], when, expect)] + list((extra or {}).get(host, []))
            self.fleet.hosts[host]["doctor"] = with_checks(doctor, *records, boot_id=(boots or {}).get(host, "boot-1"))
        report = self.fleet.report(generated_at)
        options = AnalysisOptions(history=list(self.snapshots))
        analyse(report, options)
        self.snapshots.append(json.loads(json.dumps(options.current_snapshot)))
        return report
