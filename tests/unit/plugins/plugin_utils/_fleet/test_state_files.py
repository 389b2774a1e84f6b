"""The controller's state files: a lock another real process holds is waited on until a deadline, never for ever;
what is not a regular file is refused at once; the findings store is left whole when this run is locked out."""

import datetime
import inspect
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import coverage, findings, state_files
from ansible_collections.continuum.hydra.tests.support import hung_mount
from ansible_collections.continuum.hydra.tests.support.helpers import REPO


@pytest.fixture
def holder():
    """Starts `flock` (util-linux, flock(2) like the production code) holding a path's lock; stops it after."""
    procs = []

    def hold(path):
        proc = subprocess.Popen(["flock", "--exclusive", state_files.lock_path(path), "-c", "echo held; exec sleep 600"],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
        procs.append(proc)
        assert proc.stdout.readline() == "held\n"
        return proc
    yield hold
    for proc in procs:
        stop(proc)


def stop(proc):
    """flock and the command it runs (which holds the lock too), by their process group."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_lock_held_by_another_process_is_waited_on_until_the_deadline(tmp_path, holder):
    path = str(tmp_path / "findings.json")
    proc = holder(path)
    with pytest.raises(state_files.Locked, match=r"^%s is locked by another run; gave up after 0\.3 s$" % (
            state_files.lock_path(path).replace(".", r"\."))):
        with state_files.locked(path, 0.3):
            pytest.fail("entered a lock another process holds")
    stop(proc)
    with state_files.locked(path, 5):  # released with its holder, however it ended
        pass


def test_the_lock_file_is_created_private_and_left_in_place(tmp_path):
    path = str(tmp_path / "new" / "findings.json")
    with state_files.locked(path, 1):
        pass
    assert os.stat(state_files.lock_path(path)).st_mode & 0o777 == 0o600


def test_a_lock_file_that_is_a_fifo_or_a_symlink_is_refused_at_once(tmp_path):
    fifo_path = str(tmp_path / "a.json")
    os.mkfifo(state_files.lock_path(fifo_path))
    with pytest.raises(state_files.StateFileError, match="a.json.lock is a FIFO"):
        with state_files.locked(fifo_path, 60):
            pass
    link_path = str(tmp_path / "b.json")
    os.symlink(str(tmp_path / "elsewhere"), state_files.lock_path(link_path))
    with pytest.raises(OSError):
        with state_files.locked(link_path, 60):
            pass
    assert not os.path.exists(tmp_path / "elsewhere")


def test_reading_what_is_not_a_regular_file_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(state_files.StateFileError, match="fifo is a FIFO"):
        state_files.read_text(str(tmp_path / "fifo"))
    with pytest.raises(state_files.StateFileError, match="is a directory"):
        state_files.read_text(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        state_files.read_text(str(tmp_path / "missing"))


def test_read_lines_gives_each_line_and_refuses_what_read_text_refuses(tmp_path):
    path = tmp_path / "merged.jsonl"
    lines = ["[%d]\n" % n for n in range(state_files.LINES_AHEAD * 3)] + ["last line without a newline"]
    path.write_text("".join(lines))
    assert list(state_files.read_lines(str(path))) == lines
    os.mkfifo(tmp_path / "fifo")
    for where, error, match in (("fifo", state_files.StateFileError, "fifo is a FIFO"), ("missing", FileNotFoundError, "missing"),
                                (".", state_files.StateFileError, "is a directory")):
        with pytest.raises(error, match=match):
            list(state_files.read_lines(str(tmp_path / where)))


def test_a_caller_that_stops_reading_lets_the_reader_thread_go(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text("x\n" * (state_files.LINES_AHEAD * 10))
    lines = state_files.read_lines(str(path))
    assert next(lines) == "x\n"
    readers = [t for t in threading.enumerate() if t.name == "hydra-read(%s)" % path]
    assert len(readers) == 1
    lines.close()  # the reader is blocked on a full queue: it must notice and end, not hold the file for ever
    for thread in readers:
        thread.join(10)
    assert not any(thread.is_alive() for thread in readers)


@pytest.mark.skipif(hung_mount.available() is not None, reason=str(hung_mount.available()))
def test_read_lines_on_a_hung_mount_ends_with_read_timed_out(tmp_path):
    mount = str(tmp_path / "hung")
    script = ("from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import state_files\n"
              "try:\n    list(state_files.read_lines(%r, 1.0))\nexcept state_files.ReadTimedOut as exc:\n    print('timed out:', exc)\n"
              % os.path.join(mount, "merged.jsonl"))
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "collections"))
    proc = subprocess.run(hung_mount.command(mount, [sys.executable, "-c", script]), env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "timed out: read(%s/merged.jsonl) timed out after 1s" % mount in proc.stdout, proc.stdout + proc.stderr


def _report(when, host, status):
    chk = dict(finding(status, "ECC %s" % status, {}), id="gpu.ecc_errors")
    return {"generated_at": when, "hosts": {host: {"doctor": {"environment": {"boot_id": "b1"}, "checks": [chk]}}}}


def test_a_run_locked_out_leaves_the_store_whole_and_says_so(tmp_path, holder):
    path = findings.store_path(str(tmp_path))
    stored = findings.update(findings.empty_state(), _report("2026-11-20T08:00:00+00:00", "h1", "FAIL"))
    findings.write_store(path, stored)
    with open(path) as handle:
        before = handle.read()
    holder(path)
    now = datetime.datetime(2026, 11, 21, 8, tzinfo=datetime.timezone.utc)
    state, store = findings.update_store(path, _report("2026-11-21T08:00:00+00:00", "h2", "WARN"), now, lock_wait_s=0.3)
    assert store == {"path": path, "updated": False, "set_aside": None, "problems": [
        "findings: %s not updated: %s is locked by another run; gave up after 0.3 s" % (path, state_files.lock_path(path))]}
    # The report still lists what the store holds and this run's findings.
    assert sorted(f["host"] for f in state["findings"]) == ["h1", "h2"]
    with open(path) as handle:
        assert handle.read() == before
    assert json.loads(before)["findings"][0]["host"] == "h1"


def test_json_text_is_json_dumps_in_pieces():
    value = {"b": [1, 2.5, {"x": float("nan"), "\u00e9": "\u2028"}], "a": {"k": None}, "many": list(range(30000))}
    pieces = list(state_files.json_text(value))
    assert len(pieces) > 1 and all(len(p) < 2 * state_files.PIECE_CHARS for p in pieces)
    assert "".join(pieces) == json.dumps(value, indent=1, sort_keys=True) + "\n"
    assert "".join(state_files.json_text([], indent=2)) == "[]\n"


def test_a_stored_time_is_read_one_way_for_every_store():
    # The findings store and screening.json keep ISO 8601 times; both read them through parse_time, no copy of it.
    utc = datetime.timezone.utc
    assert state_files.parse_time("2026-11-26T12:00:00") == datetime.datetime(2026, 11, 26, 12, 0, tzinfo=utc)
    assert state_files.parse_time("2026-11-26T13:00:00+01:00") == datetime.datetime(2026, 11, 26, 12, 0, tzinfo=utc)
    assert [state_files.parse_time(value) for value in ("yesterday", None, 5, "2026-13-01T00:00:00")] == [None] * 4
    assert "fromisoformat" not in inspect.getsource(coverage) + inspect.getsource(findings)
