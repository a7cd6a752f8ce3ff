"""memcached over UDP against shoal: the 8-byte frame header (request id,
sequence number, datagram count, reserved), text and binary requests of one
datagram each, replies cut into numbered datagrams of at most 1400 bytes,
many requests in flight at once.

`SHOAL_MC_TARGET=memcached` runs the same tests against a real memcached 1.6
to check the expectations; tests of shoal's own choices are skipped then.
"""

import os
import socket
import struct

import pytest

from test_memcached_binary import (GET, GETQ, NOOP, SET, VERSION, Response, request,
                                   set_extras, target)  # noqa: F401 (fixture)

MC_TARGET = os.environ.get("SHOAL_MC_TARGET", "shoal")
shoal_only = pytest.mark.skipif(MC_TARGET != "shoal", reason="shoal's own behaviour")

MAX_DATAGRAM = 1400


class Udp:
    """A UDP memcached client that keeps every datagram it gets."""

    def __init__(self, port):
        self.addr = ("127.0.0.1", port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.connect(self.addr)

    def close(self):
        self.sock.close()

    def send(self, request_id, payload, seq=0, total=1):
        self.sock.send(struct.pack(">HHHH", request_id, seq, total, 0) + payload)

    def receive(self, first=2.0, quiet=0.2):
        """Every datagram until none comes for `quiet` seconds (`first` for
        the first one), as (request id, seq, total, reserved, payload)."""
        got = []
        self.sock.settimeout(first)
        while True:
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                return got
            assert len(d) <= MAX_DATAGRAM, len(d)
            got.append(struct.unpack(">HHHH", d[:8]) + (d[8:],))
            self.sock.settimeout(quiet)

    def nothing(self):
        """No datagram comes for a moment."""
        return self.receive(first=0.5) == []

    def call(self, request_id, payload):
        self.send(request_id, payload)
        return reply_of(self.receive(), request_id)


def reply_of(datagrams, request_id):
    """The reply to `request_id`: its datagrams put in order. A message is
    numbered 0..total-1 and each datagram says the total (memcached 1.6 may
    send a request's replies as several such messages, one after another)."""
    mine = [d for d in datagrams if d[0] == request_id]
    out = b""
    while mine:
        total = mine[0][2]
        message, mine = mine[:total], mine[total:]
        assert sorted(d[1] for d in message) == list(range(total)), message
        assert all(d[2] == total and d[3] == 0 for d in message)
        out += b"".join(d[4] for d in sorted(message, key=lambda d: d[1]))
    return out


@pytest.fixture
def udp(target):
    tcp = socket.create_connection(("127.0.0.1", target.mc_port))
    tcp.sendall(b"flush_all\r\n")
    assert tcp.recv(100) == b"OK\r\n"
    tcp.close()
    c = Udp(target.mc_port)
    yield c
    c.close()


def tcp_set(target, key, value, flags=0):
    with socket.create_connection(("127.0.0.1", target.mc_port)) as s:
        s.sendall(b"set %s %d 0 %d\r\n%s\r\n" % (key, flags, len(value), value))
        assert s.recv(100) == b"STORED\r\n"


def test_version_echoes_the_request_id(udp):
    udp.send(0xBEEF, b"version\r\n")
    got = udp.receive()
    assert len(got) == 1
    rid, seq, total, reserved, payload = got[0]
    assert (rid, seq, total, reserved) == (0xBEEF, 0, 1, 0)
    assert payload.startswith(b"VERSION 1.6.") and payload.endswith(b"\r\n")


def test_set_and_get(udp, target):
    assert udp.call(1, b"set k 5 0 5\r\nhello\r\n") == b"STORED\r\n"
    assert udp.call(2, b"get k\r\n") == b"VALUE k 5 5\r\nhello\r\nEND\r\n"
    assert udp.call(3, b"delete k\r\n") == b"DELETED\r\n"
    assert udp.call(4, b"get k\r\n") == b"END\r\n"
    # What UDP stores, TCP reads.
    udp.call(5, b"set shared 0 0 2\r\nok\r\n")
    with socket.create_connection(("127.0.0.1", target.mc_port)) as s:
        s.sendall(b"get shared\r\n")
        assert s.recv(100) == b"VALUE shared 0 2\r\nok\r\nEND\r\n"


def test_noreply_sends_no_datagram(udp):
    udp.send(7, b"set q 0 0 1 noreply\r\nx\r\n")
    assert udp.nothing()
    assert udp.call(8, b"get q\r\n") == b"VALUE q 0 1\r\nx\r\nEND\r\n"


@pytest.mark.parametrize("size", [1000, 5000, 100_000, 1_000_000])
def test_a_large_get_comes_in_numbered_datagrams(udp, target, size):
    value = bytes(b"abcdefghij"[i % 10] for i in range(size))
    tcp_set(target, b"big", value, flags=3)
    udp.send(0x1234, b"get big\r\n")
    got = udp.receive()
    expected = b"VALUE big 3 %d\r\n%s\r\nEND\r\n" % (size, value)
    assert reply_of(got, 0x1234) == expected
    # Full datagrams but the last: 1400 bytes with the header.
    lengths = [8 + len(d[4]) for d in sorted(got, key=lambda d: d[1])]
    assert all(n == MAX_DATAGRAM for n in lengths[:-1])
    assert len(got) == -(-len(expected) // (MAX_DATAGRAM - 8))


def test_many_requests_in_flight(udp, target):
    for i in range(50):
        tcp_set(target, b"key%d" % i, b"value%d" % i)
    for i in range(200):
        udp.send(1000 + i, b"get key%d\r\n" % (i % 50))
    got = udp.receive(quiet=0.5)
    for i in range(200):
        key = b"key%d" % (i % 50)
        val = b"value%d" % (i % 50)
        assert reply_of(got, 1000 + i) == \
            b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (key, len(val), val)


def test_clients_are_told_apart(target, udp):
    other = Udp(target.mc_port)
    try:
        udp.send(1, b"set a 0 0 1\r\nA\r\n")
        other.send(1, b"set b 0 0 1\r\nB\r\n")
        assert reply_of(udp.receive(), 1) == b"STORED\r\n"
        assert reply_of(other.receive(), 1) == b"STORED\r\n"
        other.send(2, b"get a b\r\n")
        assert reply_of(other.receive(), 2) == \
            b"VALUE a 0 1\r\nA\r\nVALUE b 0 1\r\nB\r\nEND\r\n"
    finally:
        other.close()


def test_a_request_over_several_datagrams_is_dropped(udp):
    udp.send(5, b"get k\r\n", seq=0, total=2)
    assert udp.nothing()
    # The next one is served.
    assert udp.call(6, b"version\r\n").startswith(b"VERSION")


def test_a_bare_header_and_an_incomplete_line_are_ignored(udp):
    udp.sock.send(struct.pack(">HHHH", 9, 0, 1, 0))
    udp.send(10, b"get k")
    assert udp.nothing()
    assert udp.call(12, b"get k\r\n") == b"END\r\n"


@shoal_only
def test_a_datagram_is_a_request_of_its_own(udp):
    # A data block cut short is dropped with its datagram (memcached 1.6
    # would take the next datagram as the rest of the block).
    udp.send(11, b"set k 0 0 10\r\nshort\r\n")
    assert udp.nothing()
    assert udp.call(12, b"get k\r\n") == b"END\r\n"


def test_errors_are_replied(udp):
    assert udp.call(1, b"bogus\r\n") == b"ERROR\r\n"
    assert udp.call(2, b"incr nothing 1\r\n") == b"NOT_FOUND\r\n"


def test_binary_requests(udp):
    got = udp.call(3, request(VERSION, opaque=44))
    r = Response(got[:24], got[24:])
    assert (r.opcode, r.status, r.opaque) == (VERSION, 0, 44)
    assert r.value.startswith(b"1.6.")
    got = udp.call(4, request(GET, b"missing", opaque=45))
    r = Response(got[:24], got[24:])
    assert (r.status, r.value, r.opaque) == (1, b"Not found", 45)


@shoal_only
def test_binary_set_and_quiet_requests(udp):
    # memcached 1.6 reads a binary value from the socket after the header,
    # which UDP cannot do; shoal takes the datagram whole.
    got = udp.call(5, request(SET, b"k", set_extras(9), b"v" * 3000, opaque=1))
    assert Response(got[:24], got[24:]).status == 0
    got = udp.call(6, request(GETQ, b"nope", opaque=2) + request(GET, b"k", opaque=3)
                   + request(NOOP, opaque=4))
    responses = []
    while got:
        n = 24 + struct.unpack(">I", got[8:12])[0]
        responses.append(Response(got[:24], got[24:n]))
        got = got[n:]
    assert [(r.opaque, r.value) for r in responses] == [(3, b"v" * 3000), (4, b"")]
    assert responses[0].flags == 9


@shoal_only
def test_a_datagram_of_requests_gets_one_reply_message(udp):
    # One message, numbered across the whole reply (memcached 1.6 sends each
    # request's reply as a message of its own).
    udp.send(20, b"set a 0 0 1\r\nA\r\nget a\r\nget nope\r\n")
    got = udp.receive()
    assert [(d[1], d[2]) for d in got] == [(0, 1)]
    assert got[0][4] == b"STORED\r\nVALUE a 0 1\r\nA\r\nEND\r\nEND\r\n"



@shoal_only
def test_every_worker_serves_udp(make_server):
    # SO_REUSEPORT spreads senders over the workers; all share one store.
    s = make_server(workers=2)
    clients = [Udp(s.mc_port) for _ in range(8)]
    try:
        for i, c in enumerate(clients):
            assert c.call(1, b"set k%d 0 0 1\r\n%d\r\n" % (i, i)) == b"STORED\r\n"
        for i, c in enumerate(clients):
            j = (i + 1) % len(clients)
            assert c.call(2, b"get k%d\r\n" % j) == b"VALUE k%d 0 1\r\n%d\r\nEND\r\n" % (j, j)
    finally:
        for c in clients:
            c.close()
