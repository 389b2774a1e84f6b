# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The standard-library backend: a ring all-reduce over plain TCP between the hosts (no torch, no GPU).

The buffer is little-endian unsigned 32-bit elements, cut into one chunk per rank. Reduce-scatter: in N-1 steps
every rank sends one chunk to its right neighbour and adds the chunk coming from its left one into its result;
all-gather: N-1 more steps pass the fully reduced chunks round. Each rank sends 2(N-1)/N of the buffer, which is
why nccl-tests' bus bandwidth (algbw x 2(N-1)/N) is the per-link figure.

Sending and receiving overlap: a sender thread drains a queue of slices while the main thread receives the next
slice, adds it and queues the sum for the next step (a slice is forwarded as soon as it is reduced, so the ring
is a pipeline, not N-1 stop-and-go steps). Small buffers are sent inline (they fit the socket buffers).

Exact and self-checking: rank r's input is (r + 1) x base, base's elements short enough that the sum of all
ranks, base x N(N+1)/2, cannot overflow an element; every rank compares its result with that, so a flipped bit
anywhere on the path is found. The additions are whole-slice operations - NumPy where importable, else
``audioop.add`` (standard library up to Python 3.12), else Python integers (int.from_bytes of a slice: no
carry can cross elements, so one big addition is the element-wise sum) - all giving the same bytes.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import queue
import random
import socket
import sys
import threading
import time
import warnings
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._fabric.wire import PeerClosed, PeerSilent, close_quietly, recv_exact

ELEMENT = 4  # bytes: uint32, little-endian
SLICE_BYTES = 256 * 1024  # the pipeline's unit: big enough for few syscalls, small enough to overlap
INLINE_BYTES = 16 * 1024  # a step this small is sent without the sender thread (fits any socket buffer)

Reducer = Callable[[memoryview, memoryview, memoryview], None]


class RingFailed(Exception):
    """The ring broke: ``side`` is "left" (receiving) or "right" (sending), ``reason`` what happened."""

    def __init__(self, side: str, reason: str) -> None:
        super().__init__("%s neighbour %s" % (side, reason))
        self.side = side
        self.reason = reason


class RunDeadline(Exception):
    """The run's deadline passed between two slices."""


# ---------------------------------------------------------------- element-wise addition of whole slices

def _int_add(a: memoryview, b: memoryview, out: memoryview) -> None:
    out[:] = (int.from_bytes(a, "little") + int.from_bytes(b, "little")).to_bytes(len(out), "little")


def _audioop_add() -> Optional[Reducer]:
    if sys.byteorder != "little":
        return None  # audioop adds native-order samples
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in 3.11, removed in 3.13
            import audioop  # pylint: disable=import-outside-toplevel,deprecated-module
    except ImportError:
        return None
    add = audioop.add

    def reduce(a: memoryview, b: memoryview, out: memoryview) -> None:
        out[:] = add(a, b, ELEMENT)  # signed 32-bit, saturating: the values never reach 2**31, so exact

    return reduce


def _numpy_add() -> Optional[Reducer]:
    try:
        import numpy  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    dtype = numpy.dtype("<u4")

    def reduce(a: memoryview, b: memoryview, out: memoryview) -> None:
        numpy.add(numpy.frombuffer(a, dtype), numpy.frombuffer(b, dtype), out=numpy.frombuffer(out, dtype))

    return reduce


def pick_reducer(prefer: Optional[str] = None) -> tuple[str, Reducer]:
    """(name, function): numpy, audioop or int, the fastest available (or ``prefer`` when available)."""
    found: dict[str, Optional[Reducer]] = {"numpy": _numpy_add(), "audioop": _audioop_add(), "int": _int_add}
    if prefer:
        chosen = found.get(prefer)
        if chosen is None:
            raise ValueError("reducer %r is not available here; available: %s"
                             % (prefer, ", ".join(name for name, fn in found.items() if fn is not None)))
        return prefer, chosen
    for name in ("numpy", "audioop", "int"):
        function = found[name]
        if function is not None:
            return name, function
    return "int", _int_add  # not reached: int is always there


# ---------------------------------------------------------------- buffers

def value_bits(world: int) -> int:
    """Bits each element of base may use, so that base x N(N+1)/2 stays below 2**31 (audioop's samples are signed)."""
    return 31 - (world * (world + 1) // 2).bit_length()


def base_buffer(nbytes: int, world: int, seed: int) -> bytes:
    """The seeded base all ranks share: random elements below 2**value_bits(world)."""
    bits = value_bits(world)
    if bits < 1:
        raise ValueError("a ring of %d ranks cannot be checked exactly with 32-bit elements" % world)
    rng = random.Random(seed)
    mask = int.from_bytes(((1 << bits) - 1).to_bytes(ELEMENT, "little") * (nbytes // ELEMENT), "little")
    return (rng.getrandbits(nbytes * 8) & mask).to_bytes(nbytes, "little")


def scaled(base: bytes, factor: int) -> bytes:
    """base x factor element-wise (no element overflows by construction of base)."""
    return (int.from_bytes(base, "little") * factor).to_bytes(len(base), "little")


def chunk_bounds(nbytes: int, world: int) -> list[tuple[int, int]]:
    """Byte ranges of the N chunks (element-aligned, sizes differ by at most one element; some may be empty)."""
    elements = nbytes // ELEMENT
    return [(c * elements // world * ELEMENT, (c + 1) * elements // world * ELEMENT) for c in range(world)]


def _slices(start: int, end: int, size: int) -> list[tuple[int, int]]:
    return [(at, min(at + size, end)) for at in range(start, end, size)]


# ---------------------------------------------------------------- the ring

class _Sender:
    """A thread that sends queued slices, in order, to the right neighbour; errors are kept for the main thread."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.error: Optional[str] = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="hydra-fabric-send", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            if self.error is not None:
                continue  # drain: nothing more can be sent
            try:
                self.sock.sendall(item)
            except socket.timeout:
                self.error = "accepted nothing for %gs" % (self.sock.gettimeout() or 0)
            except OSError as exc:
                self.error = "reset the connection" if isinstance(exc, (ConnectionResetError, BrokenPipeError)) else (exc.strerror or str(exc))

    def put(self, view: memoryview) -> None:
        self._queue.put(view)

    def flush(self, deadline: float) -> None:
        """Wait until everything queued so far is sent; RingFailed / RunDeadline otherwise."""
        done = threading.Event()
        self._queue.put(done)
        while not done.wait(0.05):
            if self.error is not None:
                break
            if time.monotonic() > deadline:
                raise RunDeadline("the run deadline passed while sending")
        if self.error is not None:
            raise RingFailed("right", self.error)

    def stop(self) -> None:
        self._queue.put(None)


class Ring:
    """This rank's two ring connections: to the right neighbour (send) and from the left one (receive)."""

    def __init__(self, rank: int, world: int, right: socket.socket, left: socket.socket, reducer: Reducer,
                 step_timeout: float) -> None:
        self.rank = rank
        self.world = world
        self.right = right
        self.left = left
        self.reducer = reducer
        for sock in (right, left):
            sock.settimeout(step_timeout)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a step must not wait for Nagle
            except OSError:
                pass  # not TCP (a test's socketpair)
        self.step_timeout = step_timeout
        self._sender = _Sender(right)
        self._scratch = bytearray(SLICE_BYTES)

    def interrupt(self) -> None:
        """Unblock a receive or send in progress (another thread): shut the connections down, keep them open."""
        for sock in (self.right, self.left):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._sender.stop()
        close_quietly(self.right)
        close_quietly(self.left)

    def _recv(self, view: memoryview, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise RunDeadline("the run deadline passed")
        try:
            self.left.settimeout(max(min(self.step_timeout, deadline - time.monotonic()), 0.001))
            recv_exact(self.left, view)
        except (PeerClosed, OSError) as exc:
            raise RingFailed("left", str(exc)) from None
        except PeerSilent:
            if time.monotonic() > deadline:
                raise RunDeadline("the run deadline passed") from None
            raise RingFailed("left", "sent nothing for %gs" % self.step_timeout) from None
        if self._sender.error is not None:
            raise RingFailed("right", self._sender.error)

    def _send_inline(self, view: memoryview) -> None:
        try:
            self.right.sendall(view)
        except socket.timeout:
            raise RingFailed("right", "accepted nothing for %gs" % self.step_timeout) from None
        except OSError as exc:
            raise RingFailed("right", "reset the connection" if isinstance(exc, (ConnectionResetError, BrokenPipeError))
                             else (exc.strerror or str(exc))) from None

    def allreduce(self, src: memoryview, dst: memoryview, deadline: float) -> None:
        """dst = the element-wise sum of every rank's src (same length on every rank)."""
        world, rank = self.world, self.rank
        if world == 1:
            dst[:] = src
            return
        bounds = chunk_bounds(len(src), world)
        inline = max(end - start for start, end in bounds) <= INLINE_BYTES
        send: Callable[[memoryview], None] = self._send_inline if inline else self._sender.put
        scratch = memoryview(self._scratch)

        start, end = bounds[rank]
        for a, b in _slices(start, end, SLICE_BYTES):
            send(src[a:b])
        for step in range(world - 1):  # reduce-scatter
            start, end = bounds[(rank - step - 1) % world]
            for a, b in _slices(start, end, SLICE_BYTES):
                part = scratch[:b - a]
                self._recv(part, deadline)
                self.reducer(src[a:b], part, dst[a:b])
                send(dst[a:b])  # the next step's send: reduced further on the right, or (last step) gathered
        for step in range(world - 1):  # all-gather
            start, end = bounds[(rank - step) % world]
            for a, b in _slices(start, end, SLICE_BYTES):
                self._recv(dst[a:b], deadline)
                if step < world - 2:
                    send(dst[a:b])
        if not inline:
            self._sender.flush(deadline)


def sweep(ring: Ring, sizes: list[int], iterations: int, warmup: int, seed: int, deadline: float,
          latency_iterations: int, progress: Optional[Callable[[int], None]] = None) -> list[dict[str, Any]]:
    """All-reduce each size: warm up, time ``iterations`` back to back (``latency_iterations`` for sizes up to one
    slice of every rank), check the last result exactly. One row per size: bytes, seconds (mean), verified.

    Every size starts with a tiny all-reduce, so the ranks start each size together."""
    rows = []
    fence_src = memoryview(bytearray(ELEMENT * ring.world))
    fence_dst = memoryview(bytearray(ELEMENT * ring.world))
    total = ring.world * (ring.world + 1) // 2
    for index, nbytes in enumerate(sizes):
        base = base_buffer(nbytes, ring.world, seed + index)
        src = memoryview(bytearray(scaled(base, ring.rank + 1)))
        dst = memoryview(bytearray(nbytes))
        expected = scaled(base, total)
        del base
        for _warm in range(warmup):
            ring.allreduce(src, dst, deadline)
        ring.allreduce(fence_src, fence_dst, deadline)
        count = latency_iterations if nbytes <= INLINE_BYTES * ring.world else iterations
        began = time.perf_counter()
        for _timed in range(count):
            ring.allreduce(src, dst, deadline)
        seconds = (time.perf_counter() - began) / count
        rows.append({"bytes": nbytes, "seconds": seconds, "iterations": count, "verified": dst == expected})
        if progress is not None:
            progress(index)
    return rows
