"""The AMD probes through real processes: fake amd-smi / rocm-smi / journalctl scripts replaying recorded output
on PATH, and a sysfs tree under a temporary directory."""

import json
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import amd
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.tests.support.amd import MI300X, build_host, metric_text, write
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

OPTIONS = {"timeouts": {"nvidia_smi": 5, "kernel_log": 5, "command": 5}}


def script(directory, name, body):
    path = os.path.join(str(directory), name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, 0o755)
    return path


def fake_amd_smi(bindir, calls, static=None, metric=None, listing=None):
    """amd-smi answering list/static/metric from files, logging each call."""
    files = {}
    for sub, text in (("list", listing or "[]"), ("static", static or read_fixture("amd", "amd-smi", "dme-mi210-static-inbox-driver.json")),
                      ("metric", metric or metric_text())):
        files[sub] = os.path.join(str(bindir), "%s.json" % sub)
        with open(files[sub], "w") as handle:
            handle.write(text)
    script(bindir, "amd-smi", 'echo "$*" >> "%s"\ncase "$1" in list) cat "%s";; static) cat "%s";; metric) cat "%s";; '
                              '*) exit 2;; esac' % (calls, files["list"], files["static"], files["metric"]))


@pytest.fixture
def sysfs_host(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    return build_host(root)


@pytest.fixture
def bindir(tmp_path, monkeypatch):
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % path)
    return path


def test_amd_smi_is_called_once_per_subcommand_and_sysfs_adds_bad_pages_and_replay_growth(bindir, tmp_path, sysfs_host):
    calls = str(tmp_path / "calls")
    listing = json.dumps([{"gpu": 0, "bdf": MI300X, "uuid": "u0"}])
    fake_amd_smi(bindir, calls, listing=listing)
    data = amd.probe_amd_smi(OPTIONS, root=sysfs_host)
    with open(calls) as handle:
        assert handle.read().splitlines() == ["list --json", "static --json", "metric --json"]
    (gpu,) = data["gpus"]
    assert data["source"] == "amd-smi" and gpu["pci_bus_id"] == MI300X
    assert gpu["bad_pages"] == {"retired": 1, "pending": 1, "unreservable": 0, "threshold": 655}
    assert gpu["pcie"]["replay_growth"] == 0
    # amd-smi gave the in-box banner, sysfs the DKMS module: the module's version is the driver's.
    assert (data["driver_version"], data["driver_kind"]) == ("6.10.5", "dkms")
    assert [g["address"] for g in data["pci_gpus"]] == [MI300X, "0000:83:00.0"] and data["kfd"]["gpu_nodes"] == 1
    json.dumps(data, allow_nan=False)


def test_replays_counted_while_the_tools_ran_are_the_growth(bindir, tmp_path, sysfs_host):
    counter = os.path.join(sysfs_host, "sys/bus/pci/devices/%s/pcie_replay_count" % MI300X)
    fake_amd_smi(bindir, str(tmp_path / "calls"), listing=json.dumps([{"gpu": 0, "bdf": MI300X}]))
    # The fake amd-smi's metric call bumps the replay counter, as a marginal link would while it runs.
    script(bindir, "amd-smi.real", "")
    os.rename(str(bindir / "amd-smi"), str(bindir / "amd-smi.real"))
    script(bindir, "amd-smi", '[ "$1" = metric ] && echo 7 > "%s"\nexec "%s" "$@"' % (counter, bindir / "amd-smi.real"))
    assert amd.probe_amd_smi(OPTIONS, root=sysfs_host)["gpus"][0]["pcie"]["replay_growth"] == 7


@pytest.mark.parametrize("body, words", [
    ('case "$1" in metric) echo "AMDSMI_STATUS_DRM_ERROR" >&2; exit 1;; *) echo "[]";; esac', "amd-smi metric --json exited with rc 1"),
    ('echo "Traceback (most recent call last):"', "amd-smi returned unreadable JSON"),
    ("exec sleep 30", "timed out"),
])
def test_a_broken_amd_smi_is_a_probe_error(bindir, tmp_path, body, words):
    script(bindir, "amd-smi", body)
    options = {"timeouts": {"nvidia_smi": 1}}
    with pytest.raises(ProbeError, match=words):
        amd.probe_amd_smi(options, root=str(tmp_path))


def test_rocm_smi_when_there_is_no_amd_smi(bindir, tmp_path):
    recording = fixture_path("amd", "rocm-smi", "telegraf-mi100_rocm602.json")
    script(bindir, "rocm-smi", '[ "$*" = "--showallinfo --json" ] || exit 2\ncat "%s"' % recording)
    data = amd.probe_amd_smi(OPTIONS, root=str(tmp_path))
    assert data["source"] == "rocm-smi" and len(data["gpus"]) == 4 and data["gpus"][0]["pcie"]["replay_growth"] is None


def test_sysfs_when_there_is_no_tool(bindir, sysfs_host):
    data = amd.probe_amd_smi(OPTIONS, root=sysfs_host)
    assert data["source"] == "sysfs" and data["gpus"][0]["name"] == "AMD Instinct MI300X"


def test_no_tool_and_no_amd_gpu_is_absent_and_a_gpu_without_any_tool_is_listed(bindir, tmp_path, sysfs_host):
    with pytest.raises(ProbeAbsent, match="no AMD GPU"):
        amd.probe_amd_smi(OPTIONS, root=str(tmp_path / "empty"))
    os.unlink(os.path.join(sysfs_host, "sys/class/drm/card1/device"))
    data = amd.probe_amd_smi(OPTIONS, root=sysfs_host)
    assert data["gpus"] == [] and len(data["pci_gpus"]) == 2 and data["problems"]


def test_amdgpu_log_from_journalctl(bindir, tmp_path, sysfs_host):
    log = tmp_path / "kernel.log"
    log.write_text(read_fixture("amd", "kernel-log", "rocm-install-615-mi210-fatal-init.log"))
    script(bindir, "journalctl", 'cat "%s"' % log)
    data = amd.probe_amdgpu_log(OPTIONS, root=sysfs_host)
    assert data["source"] == "journalctl" and [c["kind"] for c in data["counts"]] == ["init_failed"]
    assert data["counts"][0]["pci"] == "0000:83:00" and data["counts"][0]["count"] == 2


def test_amdgpu_log_rejects_a_bad_window(sysfs_host):
    with pytest.raises(ProbeError, match="xid_window_hours"):
        amd.probe_amdgpu_log(dict(OPTIONS, xid_window_hours=0), root=sysfs_host)


def test_without_anything_amd_the_kernel_log_is_not_read_again(bindir, tmp_path):
    script(bindir, "journalctl", "exit 99")  # would make the probe an error, were it called
    with pytest.raises(ProbeAbsent, match="no AMD GPU"):
        amd.probe_amdgpu_log(OPTIONS, root=str(tmp_path / "empty"))


def test_sysfs_ras_counts_reach_the_amd_smi_record(bindir, tmp_path, sysfs_host):
    write(sysfs_host, "sys/bus/pci/devices/%s/ras/umc_err_count" % MI300X, "ue: 1\nce: 0\n")
    fake_amd_smi(bindir, str(tmp_path / "calls"), listing=json.dumps([{"gpu": 0, "bdf": MI300X}]))
    gpu = amd.probe_amd_smi(OPTIONS, root=sysfs_host)["gpus"][0]
    # amd-smi's totals said 0 (its ecc_blocks were N/A): an error sysfs counts is counted.
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 1 and gpu["ecc"]["volatile"]["dram_uncorrectable"] == 1
    assert gpu["ras_blocks"]["UMC"]["uncorrectable"] == 1


def test_a_failing_rocm_tool_on_a_host_without_amd_gpu_is_absent_but_garbage_stays_an_error(bindir, tmp_path):
    root = tmp_path / "nvidia-node"
    (root / "sys/bus/pci/devices").mkdir(parents=True)  # a readable PCI bus with no AMD GPU on it
    script(bindir, "amd-smi", 'echo "ERROR:root:Unable to detect any GPU devices, check amdgpu version and module status" >&2; exit 255')
    with pytest.raises(ProbeAbsent, match="no AMD GPU on the PCI bus"):
        amd.probe_amd_smi(OPTIONS, root=str(root))
    script(bindir, "amd-smi", "echo '{not json'")
    with pytest.raises(ProbeError, match="unreadable JSON"):
        amd.probe_amd_smi(OPTIONS, root=str(root))
