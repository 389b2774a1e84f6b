"""The standard-library ring all-reduce over real TCP connections on loopback (threads as ranks)."""

import socket
import struct
import threading
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._fabric import ring as R


def tcp_links(world):
    """world real TCP connections on loopback: links[i] = (sending end of i -> i+1, receiving end at i+1)."""
    links = []
    for _link in range(world):
        listener = socket.create_server(("127.0.0.1", 0))
        out = socket.create_connection(listener.getsockname())
        into, _address = listener.accept()
        listener.close()
        links.append((out, into))
    return links


def run_ring(world, sizes, reducer=None, inputs=None, step_timeout=10.0):
    """Every rank's sweep rows, each rank in a thread with its own Ring (right = links[r], left = links[r-1])."""
    links = tcp_links(world)
    rows, errors = {}, {}

    def rank(r):
        try:
            _name, add = R.pick_reducer(reducer)
            ring = R.Ring(r, world, links[r][0], links[(r - 1) % world][1], add, step_timeout)
            rows[r] = R.sweep(ring, sizes, 2, 1, 11 if inputs is None else inputs[r], time.monotonic() + 60, 3)
            ring.close()
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    return rows, errors


def available_reducers():
    names = []
    for name in ("numpy", "audioop", "int"):
        try:
            R.pick_reducer(name)
            names.append(name)
        except ValueError:
            pass
    return names


@pytest.mark.parametrize("reducer", available_reducers())
def test_every_reducer_is_the_element_wise_sum(reducer):
    values_a = [0, 1, 2 ** 20, 12345, 2 ** 29]
    values_b = [5, 2 ** 30 - 1, 7, 0, 2 ** 29]
    a = memoryview(struct.pack("<5I", *values_a))
    b = memoryview(struct.pack("<5I", *values_b))
    out = memoryview(bytearray(20))
    R.pick_reducer(reducer)[1](a, b, out)
    assert list(struct.unpack("<5I", out)) == [x + y for x, y in zip(values_a, values_b)]


def test_an_unavailable_reducer_is_a_clear_error():
    with pytest.raises(ValueError, match="reducer 'abacus' is not available here; available: .*int"):
        R.pick_reducer("abacus")


@pytest.mark.parametrize("world", [2, 3, 16, 1000])
def test_the_base_leaves_room_for_the_sum_of_every_rank(world):
    base = R.base_buffer(4096, world, seed=3)
    biggest = max(struct.unpack("<1024I", base))
    assert biggest < 2 ** R.value_bits(world)
    assert biggest * world * (world + 1) // 2 < 2 ** 31  # audioop adds signed 32-bit samples


@pytest.mark.parametrize("nbytes,world", [(4, 5), (40, 3), (1 << 20, 7), ((1 << 20) + 12, 4)])
def test_chunks_cover_the_buffer_in_element_aligned_near_equal_parts(nbytes, world):
    bounds = R.chunk_bounds(nbytes, world)
    assert bounds[0][0] == 0 and bounds[-1][1] == nbytes
    assert all(bounds[i][1] == bounds[i + 1][0] for i in range(world - 1))
    assert all(start % 4 == 0 and end % 4 == 0 for start, end in bounds)
    sizes = [end - start for start, end in bounds]
    assert max(sizes) - min(sizes) <= 4


@pytest.mark.parametrize("world", [2, 3, 5])
def test_the_ring_sums_exactly_for_tiny_odd_and_multi_slice_sizes(world):
    # 4 bytes over 5 ranks leaves empty chunks; 1 MiB + 12 spans several pipeline slices with a ragged end.
    sizes = [4, 8, 1024, (1 << 20) + 12]
    rows, errors = run_ring(world, sizes)
    assert not errors
    for r in range(world):
        assert [row["bytes"] for row in rows[r]] == sizes
        assert all(row["verified"] for row in rows[r]), rows[r]
        assert all(row["seconds"] > 0 for row in rows[r])


def test_the_reducers_interoperate_and_the_result_is_checked_for_real():
    # One rank adds with Python integers, the others with the fastest reducer: the same bytes on the wire.
    rows, errors = run_ring(3, [1 << 18], reducer=None)
    assert not errors and all(rows[r][0]["verified"] for r in range(3))
    rows, errors = run_ring(2, [1 << 18], reducer="int")
    assert not errors and all(rows[r][0]["verified"] for r in range(2))


def test_a_rank_with_other_data_makes_every_result_fail_its_check():
    # Rank 1 builds its input from another seed: the sums are not base x N(N+1)/2, and every rank sees it.
    rows, errors = run_ring(3, [4096, 1 << 18], inputs={0: 11, 1: 99, 2: 11})
    assert not errors
    assert not any(row["verified"] for r in range(3) for row in rows[r])


def test_a_neighbour_that_closes_mid_run_is_named_as_the_left_or_right_one():
    links = tcp_links(2)
    _name, add = R.pick_reducer()
    ring = R.Ring(0, 2, links[0][0], links[1][1], add, 5.0)
    links[1][0].close()  # rank 1 is gone: nothing will arrive from the left
    src = memoryview(bytearray(1 << 16))
    with pytest.raises(R.RingFailed) as failed:
        ring.allreduce(src, memoryview(bytearray(1 << 16)), time.monotonic() + 30)
    assert failed.value.side == "left" and failed.value.reason == "closed the connection"


def test_a_silent_neighbour_fails_the_step_after_the_step_timeout_not_later():
    links = tcp_links(2)
    _name, add = R.pick_reducer()
    ring = R.Ring(0, 2, links[0][0], links[1][1], add, 0.5)
    began = time.monotonic()
    with pytest.raises(R.RingFailed, match="left neighbour sent nothing for 0.5s"):
        ring.allreduce(memoryview(bytearray(64)), memoryview(bytearray(64)), time.monotonic() + 30)
    assert time.monotonic() - began < 5  # bounded by the step timeout (0.5 s), far from the run deadline


def test_the_run_deadline_ends_a_ring_that_still_moves_slowly():
    links = tcp_links(2)
    _name, add = R.pick_reducer()
    ring = R.Ring(0, 2, links[0][0], links[1][1], add, 5.0)
    with pytest.raises(R.RunDeadline):
        ring.allreduce(memoryview(bytearray(64)), memoryview(bytearray(64)), time.monotonic() - 1)
