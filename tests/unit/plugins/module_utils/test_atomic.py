"""write_atomic: a reader sees the old file or the new one, never half of one, and no temp file stays behind."""

import os
import stat

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic

OLD = "old contents, line 1\nold contents, line 2\n"


class Boom(Exception):
    pass


def _chunks_then(exc, *chunks):
    """An iterable that yields the chunks, then raises exc (as a renderer failing midway would)."""
    yield from chunks
    raise exc


def _leftovers(directory, keep):
    return sorted(name for name in os.listdir(directory) if name not in keep)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_writes_a_string_with_the_default_mode_and_nothing_else(tmp_path):
    path = tmp_path / "report.json"
    write_atomic(str(path), '{"a": 1}\n')
    assert path.read_text(encoding="utf-8") == '{"a": 1}\n'
    assert _mode(path) == 0o644
    assert _leftovers(tmp_path, {"report.json"}) == []


def test_writes_an_iterable_of_chunks_in_order(tmp_path):
    path = tmp_path / "big.txt"
    write_atomic(str(path), iter(["one\n", "two\n", "", "three\n"]))
    assert path.read_text(encoding="utf-8") == "one\ntwo\nthree\n"


def test_replaces_an_existing_file_and_applies_the_mode(tmp_path):
    path = tmp_path / "state.txt"
    path.write_text(OLD, encoding="utf-8")
    os.chmod(path, 0o666)
    write_atomic(str(path), "new\n", mode=0o600)
    assert path.read_text(encoding="utf-8") == "new\n"
    assert _mode(path) == 0o600
    assert _leftovers(tmp_path, {"state.txt"}) == []


def test_mode_is_applied_whatever_the_umask(tmp_path):
    previous = os.umask(0o077)
    try:
        write_atomic(str(tmp_path / "shared.txt"), "x", mode=0o644)
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "shared.txt") == 0o644


def test_an_iterable_that_raises_midway_leaves_the_old_file_whole_and_no_temp_file(tmp_path):
    path = tmp_path / "report.html"
    path.write_text(OLD, encoding="utf-8")
    os.chmod(path, 0o640)
    with pytest.raises(Boom, match="renderer failed"):
        write_atomic(str(path), _chunks_then(Boom("renderer failed"), "<html>", "<body>"))
    assert path.read_text(encoding="utf-8") == OLD
    assert _mode(path) == 0o640
    assert _leftovers(tmp_path, {"report.html"}) == []


def test_a_failure_before_any_file_existed_leaves_nothing(tmp_path):
    with pytest.raises(Boom):
        write_atomic(str(tmp_path / "new.txt"), _chunks_then(Boom("first chunk only"), "partial"))
    assert os.listdir(tmp_path) == []


def test_an_interrupt_midway_also_cleans_up(tmp_path):
    """BaseException too (Ctrl-C, SystemExit): the temp file goes, the old file stays."""
    path = tmp_path / "plan.yaml"
    path.write_text(OLD, encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        write_atomic(str(path), _chunks_then(KeyboardInterrupt(), "a: 1\n"))
    assert path.read_text(encoding="utf-8") == OLD
    assert _leftovers(tmp_path, {"plan.yaml"}) == []


def test_a_failing_rename_removes_the_temp_file(tmp_path):
    target = tmp_path / "taken"
    target.mkdir()
    (target / "inside").write_text("keep", encoding="utf-8")
    with pytest.raises(OSError):
        write_atomic(str(target), "cannot replace a non-empty directory")
    assert (target / "inside").read_text(encoding="utf-8") == "keep"
    assert _leftovers(tmp_path, {"taken"}) == []


def test_a_surrogate_in_the_text_does_not_lose_the_file(tmp_path):
    """A host-supplied string with a lone surrogate (undecodable bytes) is written with a replacement character."""
    path = tmp_path / "hosts.txt"
    path.write_text(OLD, encoding="utf-8")
    write_atomic(str(path), "gpu0 \udcff ok\n")
    assert path.read_bytes() == b"gpu0 ? ok\n"
    assert _leftovers(tmp_path, {"hosts.txt"}) == []


def test_a_surrogate_in_a_later_chunk_does_not_lose_the_file(tmp_path):
    path = tmp_path / "hosts.txt"
    write_atomic(str(path), iter(["first\n", "second \ud800\n"]))
    assert path.read_text(encoding="utf-8") == "first\nsecond ?\n"


def test_creates_missing_parent_directories(tmp_path):
    path = tmp_path / "a" / "b" / "out.txt"
    write_atomic(str(path), "deep\n")
    assert path.read_text(encoding="utf-8") == "deep\n"
    assert os.listdir(tmp_path / "a" / "b") == ["out.txt"]


def test_a_relative_path_is_written_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_atomic("relative.txt", "here\n")
    assert (tmp_path / "relative.txt").read_text(encoding="utf-8") == "here\n"
    assert os.listdir(tmp_path) == ["relative.txt"]


def _age(path, seconds):
    past = os.stat(path).st_mtime - seconds
    os.utime(path, (past, past))


def test_a_write_removes_stale_temp_files_of_interrupted_writes_only(tmp_path):
    stale = tmp_path / ".fleet-report.json.ab12cd_3.tmp"      # an interrupted write of ours, 10 minutes old
    fresh = tmp_path / ".fleet-report.md.zz99yy00.tmp"         # a concurrent writer's, just created
    other = tmp_path / "notes.tmp"                             # not a name we make
    old_dir = tmp_path / ".dir.abcdefgh.tmp"                   # our shape, but a directory
    for path in (stale, fresh, other):
        path.write_text("partial", encoding="utf-8")
    old_dir.mkdir()
    for path in (stale, other, old_dir):
        _age(str(path), 600)
    write_atomic(str(tmp_path / "report.html"), "<html></html>\n")
    assert sorted(os.listdir(tmp_path)) == sorted([fresh.name, other.name, old_dir.name, "report.html"])


def test_stale_cleanup_is_by_age(tmp_path):
    from ansible_collections.continuum.hydra.plugins.module_utils._atomic import STALE_SECONDS, remove_stale_temp_files

    tmp = tmp_path / ".x.json.abcdefgh.tmp"
    tmp.write_text("", encoding="utf-8")
    now = os.stat(str(tmp)).st_mtime
    assert remove_stale_temp_files(str(tmp_path), now=now + STALE_SECONDS - 1) == []
    assert remove_stale_temp_files(str(tmp_path), now=now + STALE_SECONDS + 1) == [str(tmp)]
    assert remove_stale_temp_files(str(tmp_path / "missing")) == []
