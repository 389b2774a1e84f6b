"""Disk benchmark: structure and units, and the test file removed on success, error, timeout and SIGTERM."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import disk
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import BenchError, BenchTimeout
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

# Child Pythons import the collection the way pytest does (pytest.ini pythonpath).
CHILD_ENV = dict(os.environ, PYTHONPATH=os.path.join(REPO, "collections"))


def run_script(body, directory, preexec_fn=None, wait=True):
    """Run the disk benchmark in a child Python (so limits and signals hit it, not pytest)."""
    code = textwrap.dedent("""
        import json, sys
        from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import disk
        from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import BenchError
        directory = %r
    """) % str(directory) + textwrap.dedent(body)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=preexec_fn, text=True, env=CHILD_ENV)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_random_read_figures_and_units(tmp_path):
    result = disk.run_disk(str(tmp_path), file_size_mib=4, warmup_s=0.05, duration_s=0.2, seed=1)
    assert result["status"] == "ok" and result["o_direct"] is True  # tmp_path is on a disk file system here
    assert result["block_size_bytes"] == 4096 and result["file_size_bytes"] == 4 * 1024 * 1024
    lat = result["read_latency_us"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert result["read_iops"] > 0 and result["random_reads"] > 0
    # IOPS is reads over the time spent reading: consistent with the mean latency.
    assert abs(result["read_iops"] - 1e6 / lat["mean"]) / result["read_iops"] < 0.01
    assert result["seq_read_mbps"] > 0 and result["seq_write_mbps"] > 0
    assert result["test_file_removed"] is True and os.listdir(str(tmp_path)) == []


def test_file_removed_on_timeout(tmp_path):
    with pytest.raises(BenchTimeout, match=r"timed out after 0.001s while writing the test file"):
        disk.run_disk(str(tmp_path), file_size_mib=64, warmup_s=0, duration_s=0.1, timeout_s=0.001)
    assert os.listdir(str(tmp_path)) == []


def _small_file_limit():
    import resource  # pylint: disable=import-outside-toplevel
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so the write fails with EFBIG instead of killing the child
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))


def test_file_removed_on_error(tmp_path):
    rc, out, err = run_script("""
        try:
            disk.run_disk(directory, file_size_mib=8, warmup_s=0, duration_s=0.1)
        except BenchError as exc:
            print(json.dumps({"error": str(exc)}))
    """, tmp_path, preexec_fn=_small_file_limit)
    assert rc == 0, err
    assert json.loads(out)["error"] == "disk benchmark in %s failed: File too large" % tmp_path
    assert os.listdir(str(tmp_path)) == []


def test_file_removed_on_sigterm(tmp_path):
    proc = run_script("""
        try:
            disk.run_disk(directory, file_size_mib=8, warmup_s=0, duration_s=60)
        except disk.Terminated as exc:
            print(json.dumps({"terminated": str(exc)}))
            sys.exit(3)
    """, tmp_path, wait=False)
    deadline = time.time() + 30
    while not [name for name in os.listdir(str(tmp_path)) if name.startswith(disk.TEST_FILE_PREFIX)]:
        assert time.time() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.01)
    time.sleep(0.3)  # well into the random reads
    proc.send_signal(signal.SIGTERM)
    out, _err = proc.communicate(timeout=30)
    assert proc.returncode == 3 and json.loads(out) == {"terminated": "terminated by signal 15"}
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare for a private ramfs")
def test_fallback_without_o_direct_is_labelled(tmp_path):
    """ramfs refuses O_DIRECT: mounted in a private mount namespace, gone when the child exits."""
    mount_point = tmp_path / "ramfs"
    mount_point.mkdir()
    script = textwrap.dedent("""
        import json, os, sys
        from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import disk
        result = disk.run_disk(%r, file_size_mib=2, warmup_s=0, duration_s=0.1)
        print(json.dumps({"result": result, "left": os.listdir(%r)}))
    """) % (str(mount_point), str(mount_point))
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           'mount -t ramfs ramfs "$1" && exec "$2" -c "$3"', "sh", str(mount_point), sys.executable, script],
                          capture_output=True, text=True, timeout=120, check=False, env=CHILD_ENV)
    if proc.returncode != 0 and "mount" in proc.stderr:
        pytest.skip("cannot mount ramfs here: %s" % proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    result = answer["result"]
    assert result["status"] == "fallback" and result["o_direct"] is False
    assert "WITHOUT O_DIRECT" in result["message"]
    assert any("O_DIRECT is not supported" in note for note in result["notes"])
    assert result["read_iops"] > 0 and answer["left"] == []


def test_missing_directory_and_tiny_file_are_clear_errors(tmp_path):
    with pytest.raises(BenchError, match=r"disk: directory %s does not exist" % (tmp_path / "nope")):
        disk.run_disk(str(tmp_path / "nope"))
    with pytest.raises(BenchError, match=r"file_size_mib 0.5 is below 1 MiB"):
        disk.run_disk(str(tmp_path), file_size_mib=0.5)
