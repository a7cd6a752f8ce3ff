"""memcached's binary protocol (24-byte headers) against shoal, with a compact
client written here (struct.pack) and with memccapable.

Every opcode is covered, quiet variants included, and the error paths
memcached 1.6 has: which status and text each failure gets, which ones close
the connection. `SHOAL_MC_TARGET=memcached` runs the same tests against a
real memcached 1.6 (started here on free ports) to check that the
expectations are memcached's; tests of shoal's own features are skipped then.
"""

import os
import re
import shutil
import socket
import struct
import subprocess
import time

import pytest

from memcachetest import RealMemcached
from shoaltest import Server, wait_for

MC_TARGET = os.environ.get("SHOAL_MC_TARGET", "shoal")
shoal_only = pytest.mark.skipif(MC_TARGET != "shoal", reason="shoal's own behaviour")

# Opcodes.
GET, SET, ADD, REPLACE, DELETE, INCR, DECR, QUIT, FLUSH = range(9)
GETQ, NOOP, VERSION, GETK, GETKQ, APPEND, PREPEND, STAT = range(9, 17)
SETQ, ADDQ, REPLACEQ, DELETEQ, INCRQ, DECRQ, QUITQ, FLUSHQ = range(0x11, 0x19)
APPENDQ, PREPENDQ, VERBOSITY, TOUCH, GAT, GATQ = range(0x19, 0x1F)
GATK, GATKQ = 0x23, 0x24

# Statuses and the texts memcached sends with them.
OK, NOT_FOUND, EXISTS, TOO_LARGE, EINVAL, NOT_STORED, NON_NUMERIC = range(7)
UNKNOWN = 0x81
TEXTS = {
    NOT_FOUND: b"Not found",
    EXISTS: b"Data exists for key.",
    TOO_LARGE: b"Too large.",
    EINVAL: b"Invalid arguments",
    NOT_STORED: b"Not stored.",
    NON_NUMERIC: b"Non-numeric server-side value for incr or decr",
    UNKNOWN: b"Unknown command",
}

ITEM_SIZE_MAX = 1 << 20
NO_CREATE = 0xFFFFFFFF


def request(op, key=b"", extras=b"", value=b"", cas=0, opaque=0, magic=0x80, body_len=None):
    if body_len is None:
        body_len = len(extras) + len(key) + len(value)
    head = struct.pack(">BBHBBHIIQ", magic, op, len(key), len(extras), 0, 0, body_len, opaque, cas)
    return head + extras + key + value


def set_extras(flags=0, exptime=0):
    return struct.pack(">II", flags, exptime)


def arith_extras(delta, initial=0, exptime=0):
    return struct.pack(">QQI", delta, initial, exptime)


class Response:
    def __init__(self, head, body):
        (magic, self.opcode, key_len, extras_len, _, self.status, body_len,
         self.opaque, self.cas) = struct.unpack(">BBHBBHIIQ", head)
        assert magic == 0x81, head
        assert len(body) == body_len
        self.extras = body[:extras_len]
        self.key = body[extras_len:extras_len + key_len]
        self.value = body[extras_len + key_len:]

    @property
    def flags(self):
        return struct.unpack(">I", self.extras)[0]

    def __repr__(self):
        return (f"Response(op={self.opcode:#x}, status={self.status:#x}, key={self.key!r}, "
                f"value={self.value[:40]!r}, opaque={self.opaque}, cas={self.cas})")


class Client:
    """One binary-protocol connection."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(10)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, *requests):
        self.sock.sendall(b"".join(requests))

    def _fill(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError(f"closed with {len(self.buf)} of {n} bytes")
            self.buf += chunk

    def read(self):
        self._fill(24)
        body_len = struct.unpack(">I", self.buf[8:12])[0]
        self._fill(24 + body_len)
        r = Response(self.buf[:24], self.buf[24:24 + body_len])
        self.buf = self.buf[24 + body_len:]
        return r

    def call(self, *args, **kw):
        self.send(request(*args, **kw))
        return self.read()

    def read_until_noop(self):
        """Responses up to and including a NOOP's."""
        out = []
        while True:
            r = self.read()
            out.append(r)
            if r.opcode == NOOP:
                return out

    def assert_closed(self):
        """The server closes without sending anything more."""
        self.sock.settimeout(5)
        try:
            data = self.sock.recv(1 << 16)
        except ConnectionResetError:
            data = b""
        assert self.buf == b"" and data == b"", (self.buf, data)

    def assert_silent(self):
        """Nothing arrives within a moment (a quiet request)."""
        self.sock.settimeout(0.3)
        try:
            data = self.sock.recv(1 << 16)
        except socket.timeout:
            data = b""
        finally:
            self.sock.settimeout(10)
        assert self.buf + data == b""


def assert_error(r, status, op=None):
    assert (r.status, r.value, r.key, r.extras, r.cas) == (status, TEXTS[status], b"", b"", 0), r
    if op is not None:
        assert r.opcode == op


@pytest.fixture(scope="module")
def target():
    if MC_TARGET == "memcached":
        s = RealMemcached(udp=True)
    else:
        s = Server(workers=1).start()
    yield s
    s.stop()


@pytest.fixture
def mc(target):
    """A binary connection to an emptied store."""
    c = Client(target.mc_port)
    r = c.call(FLUSH)
    assert r.status == OK
    yield c
    c.close()


def test_version_and_noop(mc):
    r = mc.call(VERSION, opaque=77)
    assert (r.opcode, r.status, r.opaque) == (VERSION, OK, 77)
    assert re.fullmatch(rb"1\.6\.\d+", r.value), r.value
    r = mc.call(NOOP, opaque=78)
    assert (r.opcode, r.status, r.opaque, r.value) == (NOOP, OK, 78, b"")


def test_set_get_keeps_32_bit_flags_and_cas(mc):
    s = mc.call(SET, b"k", set_extras(0xFFFFFFFE), b"hello", opaque=1)
    assert (s.status, s.opaque, s.value) == (OK, 1, b"")
    assert s.cas != 0
    g = mc.call(GET, b"k", opaque=2)
    assert (g.status, g.flags, g.key, g.value, g.cas, g.opaque) == \
        (OK, 0xFFFFFFFE, b"", b"hello", s.cas, 2)
    k = mc.call(GETK, b"k")
    assert (k.status, k.flags, k.key, k.value) == (OK, 0xFFFFFFFE, b"k", b"hello")


def test_cas_is_unique_per_write(mc):
    seen = set()
    for i in range(20):
        seen.add(mc.call(SET, b"k", set_extras(), str(i).encode()).cas)
    seen.add(mc.call(APPEND, b"k", b"", b"!").cas)
    seen.add(mc.call(INCR, b"n", arith_extras(1)).cas)
    seen.add(mc.call(SET, b"other", set_extras(), b"v").cas)
    assert len(seen) == 23 and 0 not in seen


def test_misses(mc):
    assert_error(mc.call(GET, b"nope"), NOT_FOUND, GET)
    # GETK's miss carries the key and no text.
    r = mc.call(GETK, b"nope")
    assert (r.status, r.key, r.value, r.extras) == (NOT_FOUND, b"nope", b"", b"")
    assert_error(mc.call(DELETE, b"nope"), NOT_FOUND)
    assert_error(mc.call(TOUCH, b"nope", struct.pack(">I", 10)), NOT_FOUND)
    assert_error(mc.call(GAT, b"nope", struct.pack(">I", 10)), NOT_FOUND)
    r = mc.call(GATK, b"nope", struct.pack(">I", 10))
    assert (r.status, r.key, r.value) == (NOT_FOUND, b"nope", b"")


def test_quiet_gets_say_nothing_on_a_miss_and_noop_flushes(mc):
    mc.call(SET, b"a", set_extras(5), b"A")
    mc.call(SET, b"b", set_extras(6), b"B")
    mc.send(request(GETQ, b"a", opaque=1), request(GETQ, b"x", opaque=2),
            request(GETKQ, b"b", opaque=3), request(GETKQ, b"y", opaque=4),
            request(GATQ, b"a", struct.pack(">I", 0), opaque=5),
            request(GATQ, b"z", struct.pack(">I", 0), opaque=6),
            request(GATKQ, b"b", struct.pack(">I", 0), opaque=7),
            request(NOOP, opaque=8))
    got = [(r.opcode, r.opaque, r.key, r.value) for r in mc.read_until_noop()]
    assert got == [(GETQ, 1, b"", b"A"), (GETKQ, 3, b"b", b"B"), (GATQ, 5, b"", b"A"),
                   (GATKQ, 7, b"b", b"B"), (NOOP, 8, b"", b"")]


def test_quiet_mutations_answer_only_errors(mc):
    mc.send(request(SETQ, b"k", set_extras(), b"v", opaque=1),
            request(ADDQ, b"k", set_extras(), b"v", opaque=2),
            request(REPLACEQ, b"missing", set_extras(), b"v", opaque=3),
            request(APPENDQ, b"missing", b"", b"v", opaque=4),
            request(PREPENDQ, b"k", b"", b"<", opaque=5),
            request(APPENDQ, b"k", b"", b">", opaque=6),
            request(DELETEQ, b"missing", opaque=7),
            request(INCRQ, b"n", arith_extras(1, 20), opaque=8),
            request(DECRQ, b"n", arith_extras(3), opaque=9),
            request(INCRQ, b"k", arith_extras(1), opaque=10),
            request(DECRQ, b"nothing", arith_extras(1, 0, NO_CREATE), opaque=11),
            request(NOOP, opaque=12))
    got = [(r.opcode, r.opaque, r.status, r.value) for r in mc.read_until_noop()]
    assert got == [
        (ADDQ, 2, EXISTS, TEXTS[EXISTS]),
        (REPLACEQ, 3, NOT_FOUND, TEXTS[NOT_FOUND]),
        (APPENDQ, 4, NOT_STORED, TEXTS[NOT_STORED]),
        (DELETEQ, 7, NOT_FOUND, TEXTS[NOT_FOUND]),
        (INCRQ, 10, NON_NUMERIC, TEXTS[NON_NUMERIC]),
        (DECRQ, 11, NOT_FOUND, TEXTS[NOT_FOUND]),
        (NOOP, 12, OK, b""),
    ]
    assert mc.call(GET, b"k").value == b"<v>"
    assert mc.call(GET, b"n").value == b"17"
    mc.send(request(DELETEQ, b"k", opaque=13), request(FLUSHQ, opaque=14))
    mc.assert_silent()
    assert_error(mc.call(GET, b"n"), NOT_FOUND)


def test_add_replace_append_prepend(mc):
    assert mc.call(ADD, b"k", set_extras(3), b"one").status == OK
    assert_error(mc.call(ADD, b"k", set_extras(), b"two"), EXISTS, ADD)
    assert_error(mc.call(REPLACE, b"missing", set_extras(), b"x"), NOT_FOUND, REPLACE)
    assert mc.call(REPLACE, b"k", set_extras(4), b"two").status == OK
    assert_error(mc.call(APPEND, b"missing", b"", b"x"), NOT_STORED, APPEND)
    assert_error(mc.call(PREPEND, b"missing", b"", b"x"), NOT_STORED, PREPEND)
    a = mc.call(APPEND, b"k", b"", b"!!")
    p = mc.call(PREPEND, b"k", b"", b"<<")
    assert a.status == p.status == OK and a.cas != p.cas
    g = mc.call(GET, b"k")
    # append and prepend keep the item's flags.
    assert (g.value, g.flags, g.cas) == (b"<<two!!", 4, p.cas)


def test_cas_compare(mc):
    first = mc.call(SET, b"c", set_extras(1), b"v1").cas
    assert_error(mc.call(SET, b"c", set_extras(1), b"v2", cas=first + 1000), EXISTS, SET)
    assert_error(mc.call(SET, b"missing", set_extras(1), b"v2", cas=first), NOT_FOUND, SET)
    second = mc.call(SET, b"c", set_extras(2), b"v2", cas=first)
    assert second.status == OK and second.cas not in (0, first)
    # A CAS makes ADD and REPLACE compare-and-swap too, as in memcached.
    third = mc.call(ADD, b"c", set_extras(3), b"v3", cas=second.cas)
    assert third.status == OK
    fourth = mc.call(REPLACE, b"c", set_extras(4), b"v4", cas=third.cas)
    assert fourth.status == OK
    assert_error(mc.call(APPEND, b"c", b"", b"x", cas=first), EXISTS, APPEND)
    assert mc.call(APPEND, b"c", b"", b"+", cas=fourth.cas).status == OK
    g = mc.call(GET, b"c")
    assert (g.value, g.flags) == (b"v4+", 4)
    assert_error(mc.call(DELETE, b"c", cas=first), EXISTS, DELETE)
    d = mc.call(DELETE, b"c", cas=g.cas)
    assert (d.status, d.value) == (OK, b"")
    assert_error(mc.call(DELETE, b"c"), NOT_FOUND)


def test_incr_decr(mc):
    def value(r):
        assert r.status == OK, r
        return struct.unpack(">Q", r.value)[0]

    created = mc.call(INCR, b"n", arith_extras(5, 42))
    # A missing item is created with the initial value (delta not added).
    assert value(created) == 42
    g = mc.call(GET, b"n")
    assert (g.value, g.flags, g.cas) == (b"42", 0, created.cas)
    assert value(mc.call(INCR, b"n", arith_extras(8, 1000))) == 50
    assert value(mc.call(DECR, b"n", arith_extras(60))) == 0
    mc.call(SET, b"n", set_extras(9), b"18446744073709551615")
    wrapped = mc.call(INCR, b"n", arith_extras(2))
    assert value(wrapped) == 1
    g = mc.call(GET, b"n")
    # incr keeps the flags; its CAS is the one the response carried.
    # (memcached pads a number that got shorter with spaces; shoal does not.)
    assert (g.value.rstrip(b" "), g.flags, g.cas) == (b"1", 9, wrapped.cas)
    assert_error(mc.call(INCR, b"nope", arith_extras(1, 5, NO_CREATE)), NOT_FOUND, INCR)
    assert_error(mc.call(DECR, b"nope", arith_extras(1, 5, NO_CREATE)), NOT_FOUND, DECR)
    mc.call(SET, b"text", set_extras(), b"abc")
    assert_error(mc.call(INCR, b"text", arith_extras(1)), NON_NUMERIC, INCR)
    assert_error(mc.call(INCR, b"n", arith_extras(1), cas=wrapped.cas + 99), EXISTS, INCR)
    assert value(mc.call(INCR, b"n", arith_extras(1), cas=wrapped.cas)) == 2


def test_incr_creates_with_an_expiry(mc):
    assert mc.call(INCR, b"n", arith_extras(1, 7, 1)).status == OK
    assert mc.call(GET, b"n").value == b"7"
    wait_for(lambda: mc.call(GET, b"n").status == NOT_FOUND, timeout=10, step=0.2,
             what="the created counter to expire")


def test_touch_and_gat(mc):
    mc.call(SET, b"k", set_extras(0xABCD, 0), b"value")
    t = mc.call(TOUCH, b"k", struct.pack(">I", 100))
    # TOUCH answers with the flags and no value.
    assert (t.status, t.extras, t.value, t.key) == (OK, struct.pack(">I", 0xABCD), b"", b"")
    g = mc.call(GAT, b"k", struct.pack(">I", 100))
    assert (g.status, g.flags, g.value, g.key) == (OK, 0xABCD, b"value", b"")
    gk = mc.call(GATK, b"k", struct.pack(">I", 1))
    assert (gk.status, gk.key, gk.value) == (OK, b"k", b"value")
    wait_for(lambda: mc.call(GET, b"k").status == NOT_FOUND, timeout=10, step=0.2,
             what="the touched item to expire")


def test_set_with_exptime(mc):
    mc.call(SET, b"short", set_extras(0, 1), b"x")
    mc.call(SET, b"long", set_extras(0, 3600), b"y")
    # An exptime past 30 days is a unix time: one in the past has expired.
    mc.call(SET, b"past", set_extras(0, 30 * 86400 + 1), b"z")
    assert_error(mc.call(GET, b"past"), NOT_FOUND)
    wait_for(lambda: mc.call(GET, b"short").status == NOT_FOUND, timeout=10, step=0.2,
             what="the item to expire")
    assert mc.call(GET, b"long").value == b"y"


def test_flush_now_and_later(mc):
    mc.call(SET, b"a", set_extras(), b"1")
    f = mc.call(FLUSH, opaque=5)
    assert (f.opcode, f.status, f.opaque) == (FLUSH, OK, 5)
    assert_error(mc.call(GET, b"a"), NOT_FOUND)
    mc.call(SET, b"b", set_extras(), b"2")
    assert mc.call(FLUSH, extras=struct.pack(">I", 2)).status == OK
    assert mc.call(GET, b"b").value == b"2"
    wait_for(lambda: mc.call(GET, b"b").status == NOT_FOUND, timeout=10, step=0.2,
             what="the delayed flush")


def test_stats(mc):
    mc.send(request(STAT, opaque=9))
    stats = {}
    while True:
        r = mc.read()
        assert (r.opcode, r.status, r.opaque) == (STAT, OK, 9)
        if r.key == b"":
            assert r.value == b""
            break
        stats[r.key.decode()] = r.value.decode()
    for name in ("pid", "uptime", "version", "curr_items", "get_hits", "cmd_get"):
        assert name in stats
    mc.send(request(STAT, b"settings"))
    settings = {}
    while (r := mc.read()).key:
        settings[r.key.decode()] = r.value.decode()
    assert settings["item_size_max"] == str(ITEM_SIZE_MAX)
    assert_error(mc.call(STAT, b"nonsense"), NOT_FOUND, STAT)
    # A reset answers the empty packet that ends a list; counters restart.
    r = mc.call(STAT, b"reset")
    assert (r.status, r.key, r.value) == (OK, b"", b"")
    mc.send(request(STAT))
    after = {}
    while (r := mc.read()).key:
        after[r.key.decode()] = r.value.decode()
    assert after["cmd_get"] == "0"
    # The connection stays open.
    assert mc.call(NOOP).status == OK


def test_too_large_values_are_refused_and_skipped(mc):
    mc.call(SET, b"big", set_extras(), b"old")
    r = mc.call(SET, b"big", set_extras(), b"x" * (ITEM_SIZE_MAX + 1), opaque=3)
    assert_error(r, TOO_LARGE, SET)
    assert r.opaque == 3
    # A failed set drops the old value, as memcached does.
    assert_error(mc.call(GET, b"big"), NOT_FOUND)
    mc.call(SET, b"small", set_extras(), b"s")
    assert_error(mc.call(APPEND, b"small", b"", b"y" * (ITEM_SIZE_MAX + 1)), TOO_LARGE, APPEND)
    assert_error(mc.call(SETQ, b"big", set_extras(), b"x" * (ITEM_SIZE_MAX + 1)), TOO_LARGE, SETQ)
    assert mc.call(GET, b"small").value == b"s"
    # An append that would grow the item past the limit is "Not stored.".
    half = b"h" * (ITEM_SIZE_MAX // 2 + 1000)
    assert mc.call(SET, b"half", set_extras(), half).status == OK
    assert_error(mc.call(APPEND, b"half", b"", half), NOT_STORED, APPEND)
    assert_error(mc.call(PREPENDQ, b"half", b"", half), NOT_STORED, PREPENDQ)
    assert mc.call(GET, b"half").value == half
    near = b"v" * (ITEM_SIZE_MAX - 1024)
    assert mc.call(SET, b"near", set_extras(), near).status == OK
    assert mc.call(GET, b"near").value == near


def test_a_huge_body_claim_is_answered_without_waiting(mc):
    mc.send(request(SET, b"k", set_extras(), body_len=8 + 1 + 0xFFFFFF00))
    assert_error(mc.read(), TOO_LARGE, SET)


def test_unknown_opcode_is_answered_and_the_connection_goes_on(mc):
    assert_error(mc.call(0x30), UNKNOWN, 0x30)
    assert_error(mc.call(0x30, value=b"body bytes"), UNKNOWN, 0x30)
    # SASL is not enabled: its opcodes are unknown commands.
    assert_error(mc.call(0x20), UNKNOWN, 0x20)
    assert mc.call(VERSION).status == OK


def test_bad_magic_closes_without_a_reply(mc):
    assert mc.call(NOOP).status == OK
    mc.send(request(VERSION, magic=0x81))
    mc.assert_closed()


def test_key_limit(mc):
    key = b"k" * 250
    assert mc.call(SET, key, set_extras(), b"v").status == OK
    assert mc.call(GET, key).value == b"v"
    r = mc.call(GET, b"k" * 251, opaque=4)
    assert_error(r, EINVAL, GET)
    assert r.opaque == 4
    mc.assert_closed()


def test_key_longer_than_the_body_closes(mc):
    mc.send(request(GET, b"abc", body_len=2))
    assert_error(mc.read(), UNKNOWN, GET)
    mc.assert_closed()


@pytest.mark.parametrize("bad", [
    request(GET, b"k", extras=b"1234"),
    request(GET),
    request(SET, b"k", b"", b"v"),
    request(DELETE, b"k", extras=b"1234"),
    request(INCR, b"k", extras=b"12345678"),
    request(NOOP, value=b"x"),
    request(QUIT, b"k"),
    request(FLUSH, b"k"),
    request(TOUCH, b"", struct.pack(">I", 1)),
], ids=["get-extras", "get-no-key", "set-no-extras", "delete-extras", "incr-short",
        "noop-body", "quit-key", "flush-key", "touch-no-key"])
def test_lengths_an_opcode_does_not_take_close(mc, bad):
    mc.send(bad)
    assert_error(mc.read(), EINVAL)
    mc.assert_closed()


def test_quit(target):
    c = Client(target.mc_port)
    r = c.call(QUIT, opaque=11)
    assert (r.opcode, r.status, r.opaque) == (QUIT, OK, 11)
    c.assert_closed()
    c = Client(target.mc_port)
    c.send(request(QUITQ))
    c.assert_closed()


def test_binary_keys_and_values(mc):
    key = bytes(range(1, 200))
    value = bytes(range(256)) * 10
    mc.call(SET, key, set_extras(7), value)
    g = mc.call(GETK, key)
    assert (g.key, g.value, g.flags) == (key, value, 7)


def test_pipeline_of_many_requests_in_one_write(mc):
    reqs = [request(SETQ, b"key%d" % i, set_extras(i), b"value%d" % i, opaque=i)
            for i in range(500)]
    reqs += [request(GETKQ, b"key%d" % i, opaque=1000 + i) for i in range(0, 1000, 2)]
    reqs.append(request(NOOP, opaque=9999))
    mc.send(*reqs)
    got = mc.read_until_noop()
    assert [(r.key, r.value, r.flags) for r in got[:-1]] == \
        [(b"key%d" % i, b"value%d" % i, i) for i in range(0, 500, 2)]
    assert got[-1].opaque == 9999


def test_requests_split_across_writes(mc):
    data = request(SET, b"split", set_extras(1), b"v" * 5000, opaque=1) + request(GET, b"split")
    for i in range(0, len(data), 7):
        mc.send(data[i:i + 7])
        time.sleep(0.0005)
    assert mc.read().status == OK
    assert mc.read().value == b"v" * 5000


@shoal_only
def test_items_are_the_strings_redis_sees(target, mc):
    r = target.client(decode_responses=False)
    r.set("from-redis", b"hello")
    g = mc.call(GET, b"from-redis")
    assert (g.status, g.value, g.flags) == (OK, b"hello", 0)
    mc.call(SET, b"from-binary", set_extras(77), b"world")
    assert r.get("from-binary") == b"world"
    r.rpush("a-list", "x")
    # Other Redis types are misses for memcached.
    assert_error(mc.call(GET, b"a-list"), NOT_FOUND)
    r.close()


@shoal_only
def test_verbosity_is_accepted(mc):
    # memcached 1.4's VERBOSITY (1.6 dropped it): success, empty body.
    r = mc.call(VERBOSITY, extras=struct.pack(">I", 1), opaque=3)
    assert (r.opcode, r.status, r.opaque, r.value) == (VERBOSITY, OK, 3, b"")


@pytest.mark.skipif(shutil.which("memccapable") is None, reason="memccapable not installed")
def test_memccapable_binary(target):
    out = subprocess.run(["memccapable", "-h", "127.0.0.1", "-p", str(target.mc_port), "-b"],
                         capture_output=True, text=True, timeout=120)
    assert "All tests passed" in out.stdout, out.stdout + out.stderr


CORPUS = os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus", "memcache_binary")


def test_fuzz_corpus_never_takes_the_server_down(target):
    """Every input the fuzzer kept, sent on a connection of its own (then
    half-closed), and as a UDP datagram: the server stays up, with the same
    worker processes."""
    pids = target.worker_pids() if MC_TARGET == "shoal" else []
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for name in sorted(os.listdir(CORPUS)):
        with open(os.path.join(CORPUS, name), "rb") as f:
            data = f.read()
        with socket.create_connection(("127.0.0.1", target.mc_port)) as s:
            s.settimeout(10)
            s.sendall(b"\x80" + data[1:] if data else data)
            s.shutdown(socket.SHUT_WR)
            try:
                while s.recv(1 << 16):
                    pass
            except ConnectionResetError:
                pass
        if len(data) < 65000:
            udp.sendto(struct.pack(">HHHH", 1, 0, 1, 0) + data, ("127.0.0.1", target.mc_port))
    udp.close()
    c = Client(target.mc_port)
    assert c.call(VERSION).status == OK
    c.close()
    if MC_TARGET == "shoal":
        assert target.worker_pids() == pids
