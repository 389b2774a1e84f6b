"""_host.files: each reader's missing-file policy, and reads bounded by a deadline."""

import os
import threading

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import files
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path

MEMINFO = fixture_path("hosts", "debian12-vm", "proc/meminfo")


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "text").write_text("42\n")
    (tmp_path / "garbage").write_text("forty-two\n")
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00\x81")
    (tmp_path / "state.json").write_text('{"a": 1}')
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "dir").mkdir()
    return tmp_path


def test_read_text_policy(tree):
    assert files.read_text(MEMINFO).startswith("MemTotal:")
    with pytest.raises(ProbeAbsent, match="missing does not exist"):
        files.read_text(str(tree / "missing"))
    with pytest.raises(ProbeAbsent):
        files.read_text(str(tree / "text" / "below_a_file"))  # NotADirectoryError: not there either
    with pytest.raises(ProbeError, match="binary: not a text file"):
        files.read_text(str(tree / "binary"))
    with pytest.raises(ProbeError, match="dir: "):
        files.read_text(str(tree / "dir"))


def test_the_other_policies(tree):
    assert files.read_text_if_exists(str(tree / "missing")) is None
    with pytest.raises(ProbeError):
        files.read_text_if_exists(str(tree / "binary"))
    with pytest.raises(ProbeError, match="missing does not exist"):
        files.read_required_text(str(tree / "missing"))
    assert files.read_text_or_none(str(tree / "missing")) is None
    assert files.read_text_or_none(str(tree / "binary")) is None
    assert files.read_text_or_none(str(tree / "text")) == "42\n"


def test_read_int(tree):
    assert files.read_int(str(tree / "text")) == 42
    assert files.read_int(str(tree / "missing"), optional=True) is None
    with pytest.raises(ProbeError, match="missing does not exist"):
        files.read_int(str(tree / "missing"))
    with pytest.raises(ProbeError, match="'forty-two' is not an integer"):
        files.read_int(str(tree / "garbage"), optional=True)


def test_read_json_or_none_and_list_dir(tree):
    assert files.read_json_or_none(str(tree / "state.json")) == {"a": 1}
    assert files.read_json_or_none(str(tree / "broken.json")) is None
    assert files.read_json_or_none(str(tree / "missing")) is None
    assert files.list_dir(str(tree)) == ["binary", "broken.json", "dir", "garbage", "state.json", "text"]
    with pytest.raises(ProbeError, match="missing: No such file or directory"):
        files.list_dir(str(tree / "missing"))


def test_a_read_with_a_deadline_on_a_blocking_fifo_raises_instead_of_hanging(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    try:
        with pytest.raises(ProbeError, match=r"read\(.*fifo\) timed out after 0.3s"):
            files.read_text(fifo, timeout=0.3)  # open() blocks for ever: no writer
        assert files.read_text_or_none(fifo, timeout=0.3) is None
    finally:
        # Release the stuck reader threads: a writer that opens and closes gives them EOF.
        for _unused in range(2):
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
    assert files.read_text(MEMINFO, timeout=5).startswith("MemTotal:")


def test_the_deadline_passes_the_read_errors_through(tmp_path):
    with pytest.raises(ProbeAbsent):
        files.read_text(str(tmp_path / "missing"), timeout=5)
    assert threading.active_count() >= 1
