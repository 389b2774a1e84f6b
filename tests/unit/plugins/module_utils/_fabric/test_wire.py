"""The control channel's frames and the HMAC challenge, over real loopback connections."""

import socket
import struct
import threading
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._fabric import wire

TOKEN = "0123456789abcdef0123456789abcdef"


def channel_pair():
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _address = listener.accept()
    listener.close()
    return wire.Channel(server, "server-side"), wire.Channel(client, "client-side")


def handshake(server_token, client_token, claimed_rank=3, server_run="run-1", client_run="run-1"):
    """Run the challenge in two threads; (what the accepting side got or raised, what the joining side raised)."""
    server, client = channel_pair()
    outcome = {}

    def accept():
        try:
            outcome["server"] = wire.challenge(server, server_token, server_run, "join", time.monotonic() + 5)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome["server"] = exc
            server.close()

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        wire.answer(client, client_token, client_run, "join", claimed_rank, time.monotonic() + 5, extra={"host": "n3"})
        outcome["client"] = None
    except Exception as exc:  # noqa: BLE001
        outcome["client"] = exc
    thread.join(10)
    return outcome["server"], outcome["client"]


def test_the_right_token_joins_both_ways_with_the_claimed_rank_and_fields():
    server, client = handshake(TOKEN, TOKEN)
    assert client is None
    assert server["rank"] == 3 and server["host"] == "n3"


def test_a_stranger_without_the_token_is_refused_and_learns_nothing():
    server, client = handshake(TOKEN, "f" * 32)
    assert isinstance(server, wire.ProtocolError) and "failed the join challenge (wrong token or run)" in str(server)
    assert isinstance(client, (wire.PeerClosed, wire.PeerSilent))


def test_a_rank_of_another_run_is_refused_before_it_answers():
    server, client = handshake(TOKEN, TOKEN, client_run="run-2")
    assert isinstance(client, wire.ProtocolError) and "is not rank of this run" in str(client)
    assert isinstance(server, (wire.PeerClosed, wire.PeerSilent))


def test_a_fake_rank_0_cannot_prove_the_token():
    # The joining side checks the accepting side's proof: a listener with another token is not rank 0.
    server, client = handshake("e" * 32, TOKEN)
    assert isinstance(client, (wire.ProtocolError, wire.PeerClosed))


def test_frames_round_trip_and_oversized_or_non_object_frames_are_refused():
    server, client = channel_pair()
    client.send({"t": "report", "rows": [1, 2]})
    assert server.recv(time.monotonic() + 5) == {"t": "report", "rows": [1, 2]}
    client.sock.sendall(struct.pack(">I", wire.MAX_FRAME + 1))
    with pytest.raises(wire.ProtocolError, match="sent a frame of 1048577 bytes"):
        server.recv(time.monotonic() + 5)
    server, client = channel_pair()
    client.sock.sendall(struct.pack(">I", 2) + b"[]")
    with pytest.raises(wire.ProtocolError, match="sent list, not a JSON object"):
        server.recv(time.monotonic() + 5)
    reader = wire.FrameReader("peer")
    data = struct.pack(">I", 9) + b'{"t":"a"}'  # a frame whose last byte arrives later, then two at once
    assert reader.feed(data[:-1]) == []
    assert reader.feed(data[-1:] + data + data) == [{"t": "a"}] * 3


def test_recv_has_a_deadline_and_names_eof():
    server, client = channel_pair()
    began = time.monotonic()
    with pytest.raises(wire.PeerSilent):
        server.recv(time.monotonic() + 0.3)
    assert time.monotonic() - began < 3
    client.close()
    with pytest.raises(wire.PeerClosed, match="closed the connection"):
        server.recv(time.monotonic() + 5)


@pytest.mark.parametrize("text,expected", [("", None), (None, None), ("29500-29599", (29500, 29599)), ("40000", (40000, 40000))])
def test_port_ranges(text, expected):
    assert wire.parse_port_range(text) == expected


@pytest.mark.parametrize("text", ["29599-29500", "0-10", "a-b", "1-70000"])
def test_bad_port_ranges_are_one_line_errors(text):
    with pytest.raises(ValueError, match=r"port_range: .* is not FIRST-LAST"):
        wire.parse_port_range(text)


def test_listen_takes_the_next_free_port_of_the_range_and_names_the_address_when_it_cannot():
    taken = wire.listen("127.0.0.1", None)
    port = taken.getsockname()[1]
    second = wire.listen("127.0.0.1", (port, port + 20))
    assert port < second.getsockname()[1] <= port + 20
    with pytest.raises(OSError, match=r"cannot listen on 127.0.0.1 \(ports %d-%d\)" % (port, port)):
        wire.listen("127.0.0.1", (port, port))
    with pytest.raises(OSError, match=r"cannot listen on 192.0.2.254 \(any port\): Cannot assign requested address"):
        wire.listen("192.0.2.254", None)
    taken.close()
    second.close()


def test_connect_gives_up_at_its_deadline_naming_the_address():
    free = wire.listen("127.0.0.1", None)
    port = free.getsockname()[1]
    free.close()
    with pytest.raises(wire.PeerSilent, match="could not connect to 127.0.0.1 port %d: Connection refused" % port):
        wire.connect("127.0.0.1", port, time.monotonic() + 0.6)
