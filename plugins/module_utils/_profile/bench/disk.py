# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Disk benchmark: 4 KiB random-read IOPS and latency with O_DIRECT, sequential write and read MB/s.

A test file of the configured size is written in the configured directory
(sequential write MB/s, fsync included), read back sequentially in 1 MiB
blocks, then read at random 4 KiB-aligned offsets at queue depth 1 for the
duration after a warmup: what fio reports with ``rw=randread bs=4k
direct=1 ioengine=psync iodepth=1``. Buffers come from mmap, so they are
page-aligned as O_DIRECT requires. Without O_DIRECT (tmpfs, some network or
FUSE file systems) the page cache would answer the reads: the benchmark falls
back to buffered I/O, drops the file's cached pages first, and says so.

The test file is the only thing profile writes, and it is always removed:
on success, on error, on timeout and on SIGTERM.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import errno
import mmap
import os
import random
import signal
import tempfile
import threading
import time
from types import FrameType
from typing import Any, Callable, Literal, Optional, Union

from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import (
    BenchError,
    BenchTimeout,
    Progress,
    mean,
    outcome,
    percentile,
    rounded,
)
from ansible_collections.continuum.hydra.plugins.module_utils._status import BENCH_FALLBACK, BENCH_OK

BLOCK_BYTES = 4096
SEQUENTIAL_BLOCK_BYTES = 1024 * 1024
TEST_FILE_PREFIX = ".hydra-profile-disk-"
# Writing and reading the file twice at a slow 50 MB/s, plus start-up: the default timeout on top of the run.
_WORST_MBPS = 50.0
_SLACK_S = 30.0
DEFAULT_FILE_SIZE_MIB = 256


class Terminated(BaseException):
    """SIGTERM arrived during the disk benchmark: unwinds through the cleanup, then ends the run."""


class _SigtermRaises:
    """Within the block, SIGTERM raises Terminated (main thread only; elsewhere signals cannot be set)."""

    def __enter__(self) -> "_SigtermRaises":
        self._previous: Optional[Union[Callable[[int, Optional[FrameType]], Any], int]] = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handler)
        return self

    @staticmethod
    def _handler(signum: int, frame: Optional[FrameType]) -> None:
        raise Terminated("terminated by signal %d" % signum)

    def __exit__(self, *exc_info: object) -> Literal[False]:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
        return False


def default_timeout_s(file_size_mib: float, warmup_s: float, duration_s: float) -> float:
    return warmup_s + duration_s + 2 * file_size_mib * 1.048576 / _WORST_MBPS + _SLACK_S


def _open(path: str, flags: int, direct: bool) -> tuple[int, bool]:
    """Open with O_DIRECT when asked and supported; returns (fd, direct actually used)."""
    if direct and hasattr(os, "O_DIRECT"):
        try:
            return os.open(path, flags | os.O_DIRECT), True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    return os.open(path, flags), False


def _check(deadline: float, timeout_s: float, doing: str) -> None:
    if time.monotonic() > deadline:
        raise BenchTimeout("disk benchmark timed out after %gs while %s" % (timeout_s, doing))


def _write_file(path: str, size: int, direct: bool, deadline: float, timeout_s: float, progress: Optional[Progress]) -> tuple[float, bool]:
    """Sequential write of the test file; returns (seconds, O_DIRECT used)."""
    block = mmap.mmap(-1, SEQUENTIAL_BLOCK_BYTES)
    block.write(os.urandom(SEQUENTIAL_BLOCK_BYTES))  # real data: no holes, nothing for a compressing fs to skip
    fd, direct = _open(path, os.O_WRONLY, direct)
    try:
        start = time.perf_counter()
        for offset in range(0, size, SEQUENTIAL_BLOCK_BYTES):
            try:
                os.pwrite(fd, block, offset)
            except OSError as exc:
                if not (direct and exc.errno == errno.EINVAL and offset == 0):
                    raise
                # The file system accepted the O_DIRECT open but not the write: buffered from here.
                os.close(fd)
                fd, direct = _open(path, os.O_WRONLY, False)
                os.pwrite(fd, block, offset)
            _check(deadline, timeout_s, "writing the test file")
            if progress is not None:
                progress("disk: sequential write", offset / 1e6, size / 1e6, "MB")
        os.fsync(fd)
        return time.perf_counter() - start, direct
    finally:
        os.close(fd)
        block.close()


def _read_sequential(fd: int, size: int, deadline: float, timeout_s: float, progress: Optional[Progress]) -> float:
    block = mmap.mmap(-1, SEQUENTIAL_BLOCK_BYTES)
    try:
        start = time.perf_counter()
        for offset in range(0, size, SEQUENTIAL_BLOCK_BYTES):
            os.preadv(fd, [block], offset)
            _check(deadline, timeout_s, "reading the test file")
            if progress is not None:
                progress("disk: sequential read", offset / 1e6, size / 1e6, "MB")
        return time.perf_counter() - start
    finally:
        block.close()


def random_reads(fd: int, blocks: int, seconds: float, rng: random.Random, deadline: Optional[float] = None,
                 progress: Optional[Progress] = None) -> list[int]:
    """Latencies (ns) of random 4 KiB reads at queue depth 1 for ``seconds`` (or until the deadline)."""
    buffers = [mmap.mmap(-1, BLOCK_BYTES)]
    latencies: list[int] = []
    append, preadv, randrange, clock = latencies.append, os.preadv, rng.randrange, time.perf_counter_ns
    now = clock()
    end = now + int(seconds * 1e9)
    if deadline is not None:
        end = min(end, now + int((deadline - time.monotonic()) * 1e9))
    try:
        while now < end:
            if preadv(fd, buffers, randrange(blocks) * BLOCK_BYTES) != BLOCK_BYTES:
                raise BenchError("short read from the test file")
            later = clock()
            append(later - now)
            now = later
            if progress is not None and len(latencies) % 4096 == 0:
                progress("disk: random read", seconds - (end - now) / 1e9, seconds)
    finally:
        buffers[0].close()
    return latencies


def _us(ns: Optional[float]) -> Optional[float]:
    """A latency in nanoseconds -> microseconds, 2 decimals."""
    return None if ns is None else rounded(ns / 1e3, 2)


def run_disk(directory: str, file_size_mib: float = DEFAULT_FILE_SIZE_MIB, warmup_s: float = 2.0, duration_s: float = 10.0,
             timeout_s: Optional[float] = None, progress: Optional[Progress] = None, seed: Optional[int] = None,
             direct: bool = True) -> dict[str, Any]:
    """Random-read IOPS / latency and sequential MB/s on a test file that is always removed."""
    if not os.path.isdir(directory):
        raise BenchError("disk: directory %s does not exist" % directory)
    size = int(file_size_mib * 1024 * 1024)
    size -= size % SEQUENTIAL_BLOCK_BYTES
    if size < SEQUENTIAL_BLOCK_BYTES:
        raise BenchError("disk: file_size_mib %r is below 1 MiB" % file_size_mib)
    timeout_s = timeout_s or default_timeout_s(file_size_mib, warmup_s, duration_s)
    deadline = time.monotonic() + timeout_s
    notes = []
    path = None
    latencies: list[int] = []
    write_s = read_s = 0.0  # both set by the run below before anything reads them
    with _SigtermRaises():
        try:
            handle, path = tempfile.mkstemp(prefix=TEST_FILE_PREFIX, suffix=".bin", dir=directory)
            os.close(handle)
            write_s, direct = _write_file(path, size, direct, deadline, timeout_s, progress)
            fd, direct = _open(path, os.O_RDONLY, direct)
            try:
                if not direct:
                    notes.append("O_DIRECT is not supported in %s: buffered reads after dropping the file's cached "
                                 "pages; a memory file system (tmpfs) still answers from RAM" % directory)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                read_s = _read_sequential(fd, size, deadline, timeout_s, progress)
                rng = random.Random(seed)
                random_reads(fd, size // BLOCK_BYTES, warmup_s, rng, deadline)
                _check(deadline, timeout_s, "warming up random reads")
                latencies = random_reads(fd, size // BLOCK_BYTES, duration_s, rng, deadline, progress)
                _check(deadline, timeout_s, "reading at random")
            finally:
                os.close(fd)
        except OSError as exc:
            raise BenchError("disk benchmark in %s failed: %s" % (directory, exc.strerror or exc)) from exc
        finally:
            if path is not None:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
    if not latencies:
        raise BenchError("disk benchmark made no random reads in %gs" % duration_s)
    ordered = sorted(latencies)
    total_s = sum(latencies) / 1e9
    return outcome(
        BENCH_OK if direct else BENCH_FALLBACK,
        "4 KiB random reads at queue depth 1 %s" % ("with O_DIRECT" if direct else "WITHOUT O_DIRECT (buffered)"),
        directory=directory,
        o_direct=direct,
        file_size_bytes=size,
        block_size_bytes=BLOCK_BYTES,
        read_iops=rounded(len(latencies) / total_s, 1),
        read_latency_us={
            "mean": _us(mean(latencies)),
            "p50": _us(percentile(ordered, 50)),
            "p95": _us(percentile(ordered, 95)),
            "p99": _us(percentile(ordered, 99)),
            "max": _us(ordered[-1]),
        },
        random_reads=len(latencies),
        seq_write_mbps=rounded(size / write_s / 1e6, 1),
        seq_read_mbps=rounded(size / read_s / 1e6, 1),
        warmup_s=warmup_s,
        duration_s=duration_s,
        test_file_removed=True,
        notes=notes,
    )
