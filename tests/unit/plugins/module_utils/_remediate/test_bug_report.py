"""Evidence before a drain (issue 27 item 5): the vendor's report taken on the node within its time and size bounds.

nvidia-bug-report.sh needs an NVIDIA driver, which this machine has not: a stand-in on PATH writes what the real one
writes where it writes it (<base>.log.gz, from a recorded nvidia-smi -q -x); amd-smi replays its recorded JSON.
"""

import gzip
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import bug_report
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path


def _tool(directory, name, body):
    path = os.path.join(str(directory), name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


# As nvidia-bug-report.sh does: --output-file BASE writes BASE.gz (here the recorded nvidia-smi -q -x, gzipped).
NVIDIA = 'test "$1" = --output-file || exit 9\ngzip -c "%s" > "$2.gz"\necho "complete"\n' % fixture_path("nvidia-smi", "a100-sxm4-v12.xml")


def params(tmp_path, **extra):
    values = {"output_dir": str(tmp_path / "evidence"), "timeout": 30, "max_bytes": 10 * 1024 * 1024,
              "nvidia_bug_report_path": None, "amd_smi_path": None}
    values.update(extra)
    return values


def test_the_nvidia_report_is_taken_where_the_tool_writes_it(tmp_path):
    tool = _tool(tmp_path, "nvidia-bug-report.sh", NVIDIA)
    found = bug_report.collect(params(tmp_path, nvidia_bug_report_path=tool))
    assert found["tool"] == tool and found["path"].endswith(".log.gz") and os.path.dirname(found["path"]) == str(tmp_path / "evidence")
    with gzip.open(found["path"], "rt") as handle:
        assert "<nvidia_smi_log>" in handle.read()
    assert found["bytes"] == os.path.getsize(found["path"])


def test_a_hung_tool_is_killed_at_the_deadline(tmp_path):
    tool = _tool(tmp_path, "nvidia-bug-report.sh", "sleep 600\n")
    with pytest.raises(bug_report.EvidenceError, match="timed out after 1"):
        bug_report.collect(params(tmp_path, nvidia_bug_report_path=tool, timeout=1))


def test_a_report_past_max_bytes_is_removed_not_fetched(tmp_path):
    tool = _tool(tmp_path, "nvidia-bug-report.sh", NVIDIA)
    with pytest.raises(bug_report.EvidenceError, match=r"more than max_bytes 100: removed, not fetched"):
        bug_report.collect(params(tmp_path, nvidia_bug_report_path=tool, max_bytes=100))
    assert os.listdir(str(tmp_path / "evidence")) == []


def test_amd_smi_json_is_gathered_into_one_file(tmp_path):
    recorded = fixture_path("amd", "amd-smi", "dme-mi210-static-inbox-driver.json")
    tool = _tool(tmp_path, "amd-smi", 'case "$1" in static) cat "%s" ;; *) echo "[]" ;; esac\n' % recorded)
    found = bug_report.collect(params(tmp_path, amd_smi_path=tool, nvidia_bug_report_path=str(tmp_path / "none")))
    with gzip.open(found["path"], "rt") as handle:
        text = handle.read()
    assert found["problems"] == [] and text.count("===== %s " % tool) == 4 and "static --json (rc 0)" in text


def test_no_vendor_tool_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    with pytest.raises(bug_report.EvidenceError, match="neither nvidia-bug-report.sh nor amd-smi found"):
        bug_report.collect(params(tmp_path))
    with pytest.raises(bug_report.EvidenceError, match="timeout: 0 is not a whole number above 0"):
        bug_report.collect(params(tmp_path, timeout=0))
