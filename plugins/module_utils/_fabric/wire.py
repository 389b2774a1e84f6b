# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The ranks' control messages and their authentication: framed JSON over TCP, HMAC-SHA256 with the run's token.

Every connection between ranks (a rank joining rank 0, a rank joining its ring neighbour) opens with a
challenge: the side that accepted sends a fresh nonce, the side that connected answers with an HMAC of that
nonce (and what it claims to be) under the run's token, and the accepting side proves it knows the token too by
an HMAC of the connecting side's nonce. A process without the token cannot join, cannot pose as rank 0, and a
replayed answer fails on the new nonce. The token is random per run and group (the planner makes it).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON holding an object; a frame over
MAX_FRAME bytes or one that is not a JSON object is a protocol error, so a stranger cannot make a rank allocate
without bound.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import errno
import hashlib
import hmac
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any, Optional

MAX_FRAME = 1 << 20
_HEADER = struct.Struct(">I")
# How long the side that accepted a connection waits for the other side's answer to its challenge: a stranger
# that connects and says nothing costs this much, not the join deadline.
HANDSHAKE_S = 10.0


class ProtocolError(Exception):
    """The other side sent something that is not a valid frame, or failed the challenge."""


class PeerClosed(Exception):
    """The other side closed the connection (EOF) or reset it."""


class PeerSilent(Exception):
    """Nothing arrived before the deadline."""


def nonce() -> str:
    return os.urandom(16).hex()


def mac(token: str, *parts: object) -> str:
    """HMAC-SHA256 under the token of the parts joined by '|' (each part's str())."""
    return hmac.new(token.encode("utf-8"), "|".join(str(part) for part in parts).encode("utf-8"), hashlib.sha256).hexdigest()


def mac_ok(token: str, given: object, *parts: object) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given, mac(token, *parts))


def recv_exact(sock: socket.socket, view: memoryview, deadline: Optional[float] = None) -> None:
    """Fill view from sock. PeerClosed on EOF or reset, PeerSilent on a socket timeout or past the deadline."""
    got = 0
    size = len(view)
    while got < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerSilent("deadline passed")
            sock.settimeout(remaining)
        try:
            count = sock.recv_into(view[got:], size - got)
        except socket.timeout:
            raise PeerSilent("nothing arrived for %.0fs" % (sock.gettimeout() or 0)) from None
        except OSError as exc:
            raise PeerClosed(_os_reason(exc)) from None
        if count == 0:
            raise PeerClosed("closed the connection")
        got += count


def _os_reason(exc: OSError) -> str:
    if exc.errno in (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED):
        return "reset the connection"
    return exc.strerror or str(exc)


class Channel:
    """A framed-JSON connection. send() may be called from several threads."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self._send_lock = threading.Lock()

    def send(self, message: dict[str, Any], timeout: float = HANDSHAKE_S) -> None:
        data = json.dumps(message, separators=(",", ":")).encode("utf-8")
        with self._send_lock:
            try:
                self.sock.settimeout(timeout)
                self.sock.sendall(_HEADER.pack(len(data)) + data)
            except socket.timeout:
                raise PeerSilent("%s accepted nothing for %.0fs" % (self.peer, timeout)) from None
            except OSError as exc:
                raise PeerClosed("%s %s" % (self.peer, _os_reason(exc))) from None

    def recv(self, deadline: float) -> dict[str, Any]:
        header = bytearray(_HEADER.size)
        recv_exact(self.sock, memoryview(header), deadline)
        (length,) = _HEADER.unpack(header)
        if length > MAX_FRAME:
            raise ProtocolError("%s sent a frame of %d bytes (at most %d)" % (self.peer, length, MAX_FRAME))
        body = bytearray(length)
        recv_exact(self.sock, memoryview(body), deadline)
        return decode(bytes(body), self.peer)

    def close(self) -> None:
        close_quietly(self.sock)


def decode(body: bytes, peer: str) -> dict[str, Any]:
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("%s sent a frame that is not JSON" % peer) from None
    if not isinstance(message, dict):
        raise ProtocolError("%s sent %s, not a JSON object" % (peer, type(message).__name__))
    return message


class FrameReader:
    """Frames from a non-blocking socket as bytes arrive (rank 0 watches every rank's channel in one thread)."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer.extend(data)
        out = []
        while len(self._buffer) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self._buffer)
            if length > MAX_FRAME:
                raise ProtocolError("%s sent a frame of %d bytes (at most %d)" % (self.peer, length, MAX_FRAME))
            if len(self._buffer) < _HEADER.size + length:
                break
            body = bytes(self._buffer[_HEADER.size:_HEADER.size + length])
            del self._buffer[:_HEADER.size + length]
            out.append(decode(body, self.peer))
        return out


def close_quietly(sock: Optional[socket.socket]) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


def parse_port_range(text: Optional[str]) -> Optional[tuple[int, int]]:
    """'29500-29599' -> (29500, 29599); '' or None -> None (any free port). ValueError naming the bad value."""
    if text is None or not str(text).strip():
        return None
    low, sep, high = str(text).strip().partition("-")
    try:
        first, last = int(low), int(high if sep else low)
    except ValueError:
        raise ValueError("port_range: %r is not FIRST-LAST, for example 29500-29599" % (text,)) from None
    if not 1 <= first <= last <= 65535:
        raise ValueError("port_range: %r is not FIRST-LAST with 1 <= FIRST <= LAST <= 65535" % (text,))
    return first, last


def listen(address: str, port_range: Optional[tuple[int, int]], backlog: int = 128) -> socket.socket:
    """A listening TCP socket on address: the first free port of the range, or any free port (0).

    OSError naming the address when it cannot be bound (not an address of this host, or every port taken)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    ports: Sequence[int] = range(port_range[0], port_range[1] + 1) if port_range else (0,)
    last_error: Optional[OSError] = None
    for port in ports:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((address, port))
            sock.listen(backlog)
            return sock
        except OSError as exc:
            sock.close()
            last_error = exc
            if exc.errno != errno.EADDRINUSE:
                break
    reason = last_error.strerror if last_error is not None and last_error.strerror else str(last_error)
    where = "any port" if not port_range else "ports %d-%d" % port_range
    raise OSError("cannot listen on %s (%s): %s" % (address, where, reason))


def connect(address: str, port: int, deadline: float, retry_s: float = 0.25) -> socket.socket:
    """Connect, retrying a refused or unreachable address until the deadline (the listener may not be up yet).

    PeerSilent naming the address and the last error past the deadline."""
    last = "no attempt"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PeerSilent("could not connect to %s port %d: %s" % (address, port, last))
        try:
            sock = socket.create_connection((address, port), timeout=min(remaining, 5.0))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except socket.timeout:
            last = "timed out"
        except OSError as exc:
            last = exc.strerror or str(exc)
        time.sleep(min(retry_s, max(deadline - time.monotonic(), 0)))


# ---------------------------------------------------------------- the two handshakes

def challenge(channel: Channel, token: str, run_id: str, purpose: str, deadline: float) -> dict[str, Any]:
    """The accepting side: send a nonce, check the answer's HMAC, prove the token back. Returns the answer.

    The answer must carry ``rank`` (an int), ``nonce`` and ``mac`` = HMAC(token, purpose, run_id, our nonce, rank,
    its nonce); ProtocolError otherwise."""
    ours = nonce()
    channel.send({"t": purpose + "-hello", "run": run_id, "nonce": ours})
    answer = channel.recv(min(deadline, time.monotonic() + HANDSHAKE_S))
    rank = answer.get("rank")
    theirs = answer.get("nonce")
    if answer.get("t") != purpose or not isinstance(rank, int) or isinstance(rank, bool) or not isinstance(theirs, str):
        raise ProtocolError("%s answered the %s challenge with %r" % (channel.peer, purpose, answer.get("t")))
    if not mac_ok(token, answer.get("mac"), purpose, run_id, ours, rank, theirs):
        raise ProtocolError("%s failed the %s challenge (wrong token or run)" % (channel.peer, purpose))
    channel.send({"t": purpose + "-ok", "mac": mac(token, purpose + "-ok", run_id, theirs, rank)})
    return answer


def answer(channel: Channel, token: str, run_id: str, purpose: str, rank: int, deadline: float,
           extra: Optional[dict[str, Any]] = None) -> None:
    """The connecting side: answer the challenge as ``rank`` (with extra fields), then check the other side's proof."""
    hello = channel.recv(deadline)
    if hello.get("t") != purpose + "-hello" or hello.get("run") != run_id or not isinstance(hello.get("nonce"), str):
        raise ProtocolError("%s is not rank of this run (it said %r for run %r)" % (channel.peer, hello.get("t"), hello.get("run")))
    ours = nonce()
    message = dict(extra or {})
    message.update({"t": purpose, "rank": rank, "nonce": ours, "mac": mac(token, purpose, run_id, hello["nonce"], rank, ours)})
    channel.send(message)
    reply = channel.recv(deadline)
    if reply.get("t") != purpose + "-ok" or not mac_ok(token, reply.get("mac"), purpose + "-ok", run_id, ours, rank):
        raise ProtocolError("%s could not prove it holds the run's token" % channel.peer)
