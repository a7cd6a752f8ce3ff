"""Key subscriptions with values (docs/pubsub.md): KSUBSCRIBE, KPSUBSCRIBE,
KUNSUBSCRIBE, KPUNSUBSCRIBE on a two-worker shoal. A subscriber gets the
key's value now, then again after every write by any worker and protocol
(Redis, memcached, HTTP), nil when the key is deleted or expires, each with
a version that only grows.

The writers run on the other worker than the subscriber unless a test says
otherwise; the race tests check that the last update is never lost."""

import select
import socket
import threading
import uuid

import pytest
import requests
from pymemcache.client.base import Client as Memcached

from shoaltest import Err, FrameReader, Push, Server, encode, raw_on_worker, wait_for
from pubsubtest import CANT

pytestmark = pytest.mark.shoal_only


@pytest.fixture(scope="module")
def two():
    s = Server(workers=2).start()
    yield s
    s.stop()


@pytest.fixture
def p():
    """A key prefix of this test's own."""
    return f"k{uuid.uuid4().hex[:10]}:"


def confirm(c, verb, *names):
    """Sends a (un)subscribe command; returns the counts it confirms."""
    c.send(encode(verb, *names))
    counts = []
    for n in names:
        f = c.reply()
        assert f[:2] == [verb.lower().encode(), n.encode()], f
        counts.append(f[2])
    return counts


class Watch:
    """A KSUBSCRIBE client: the frames of one key in order, checking that
    versions only grow."""

    def __init__(self, conn, key):
        self.conn, self.key = conn, key
        self.version = None
        assert confirm(conn, "KSUBSCRIBE", key) == [1]
        self.snapshot = self.next()

    def next(self):
        """The value of the next kmessage (None: nil)."""
        f = self.conn.reply()
        assert isinstance(f, list) and len(f) == 4 and f[:2] == [b"kmessage", self.key.encode()], f
        assert isinstance(f[2], int), f
        assert self.version is None or f[2] > self.version, f"version {f[2]} after {self.version}"
        self.version = f[2]
        return f[3]


def parsed_and_bytes(conn):
    """The next frame, parsed and as the exact bytes sent."""
    conn.consumed = b""
    f = conn.reply()
    return f, conn.consumed


def readable(conn):
    """Whether a frame (or part of one) is there to read now."""
    return bool(conn.buf) or bool(select.select([conn.sock], [], [], 0)[0])


def nothing_more(conn):
    """In RESP2 subscribed mode: PING's reply is the next frame."""
    assert conn.cmd("PING") == [b"pong", b""]


# ---------------------------------------------------------------------------
# Snapshot, then every write.


def test_a_missing_key_then_writes_from_every_protocol(two, conns, p):
    key = p + "k"
    sub, w = conns(two, 0), conns(two, 1)
    watch = Watch(sub, key)
    assert watch.snapshot is None
    assert w.cmd("SET", key, "v1") == "OK"
    assert watch.next() == b"v1"
    mc = Memcached(("127.0.0.1", two.mc_port), timeout=10)
    try:
        assert mc.set(key, b"from memcached")
        assert watch.next() == b"from memcached"
        assert mc.append(key, b"+")
        assert watch.next() == b"from memcached+"
        assert mc.delete(key)
        assert watch.next() is None
    finally:
        mc.close()
    url = f"http://127.0.0.1:{two.http_port}/{key}"
    assert requests.put(url, data=b"from http", timeout=10).status_code == 201
    assert watch.next() == b"from http"
    assert w.cmd("APPEND", key, "!") == len(b"from http!")
    assert watch.next() == b"from http!"
    assert requests.delete(url, timeout=10).status_code == 204
    assert watch.next() is None
    assert w.cmd("INCR", key) == 1
    assert watch.next() == b"1"
    assert w.cmd("INCRBY", key, 41) == 42
    assert watch.next() == b"42"
    assert w.cmd("DEL", key) == 1
    assert watch.next() is None
    nothing_more(sub)


def test_exact_frames(two, conns, p):
    key = p + "exact"
    sub, w = conns(two, 1), conns(two, 0)
    w.cmd("SET", key, "a\r\nb")
    sub.send(encode("KSUBSCRIBE", key))
    assert sub.reply_bytes() == b"*3\r\n$10\r\nksubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(key), key.encode())
    snap, raw = parsed_and_bytes(sub)
    version = snap[2]
    assert raw == b"*4\r\n$8\r\nkmessage\r\n$%d\r\n%s\r\n:%d\r\n$4\r\na\r\nb\r\n" % (
        len(key), key.encode(), version)
    w.cmd("DEL", key)
    gone, raw = parsed_and_bytes(sub)
    assert gone[2] > version
    assert raw == b"*4\r\n$8\r\nkmessage\r\n$%d\r\n%s\r\n:%d\r\n$-1\r\n" % (
        len(key), key.encode(), gone[2])


def test_expiry_sends_nil(two, conns, p):
    key = p + "ttl"
    sub, w = conns(two, 0), conns(two, 1)
    watch = Watch(sub, key)
    assert w.cmd("SET", key, "short", "PX", 50) == "OK"
    assert watch.next() == b"short"
    # nobody reads the key: the expiry sweeper removes it and says so
    wait_for(lambda: readable(sub), what="the nil frame after the key expired")
    assert watch.next() is None
    assert w.cmd("EXISTS", key) == 0


def test_expiry_noticed_on_access_sends_nil(two, conns, p):
    key = p + "lazy"
    sub, w = conns(two, 0), conns(two, 1)
    watch = Watch(sub, key)
    assert w.cmd("SET", key, "v", "PX", 1) == "OK"
    assert watch.next() == b"v"
    wait_for(lambda: w.cmd("GET", key) is None, what="the key to expire")
    wait_for(lambda: readable(sub), what="the nil frame after the key expired")
    assert watch.next() is None


@pytest.mark.parametrize("slot", [0, 1])
def test_versions_grow_with_every_write(two, conns, p, slot):
    key = p + "v"
    sub, w = conns(two, 0), conns(two, slot)
    watch = Watch(sub, key)
    for i in range(50):
        w.cmd("SET", key, str(i))
        assert watch.next() == str(i).encode()


def sorted_pairs(flat):
    return sorted(zip(flat[::2], flat[1::2]))


def test_collections_come_whole_as_resp2_arrays(two, conns, p):
    h, lst, st, z = p + "h", p + "l", p + "s", p + "z"
    w = conns(two, 1)
    w.cmd("HSET", h, "f1", "a", "f2", "b")
    w.cmd("RPUSH", lst, "x", "y", "x")
    w.cmd("SADD", st, "m1", "m2")
    w.cmd("ZADD", z, "2", "two", "1.5", "one")
    sub = conns(two, 0)
    assert confirm(sub, "KSUBSCRIBE", h) == [1]
    assert sorted_pairs(sub.reply()[3]) == [(b"f1", b"a"), (b"f2", b"b")]
    assert confirm(sub, "KSUBSCRIBE", lst) == [2]
    assert sub.reply()[3] == [b"x", b"y", b"x"]
    assert confirm(sub, "KSUBSCRIBE", st) == [3]
    assert sorted(sub.reply()[3]) == [b"m1", b"m2"]
    assert confirm(sub, "KSUBSCRIBE", z) == [4]
    assert sub.reply()[3] == [b"one", b"1.5", b"two", b"2"]

    def update(key):
        f = sub.reply()
        assert f[:2] == [b"kmessage", key.encode()], f
        return f[3]

    w.cmd("HSET", h, "f3", "c")
    assert sorted_pairs(update(h)) == [(b"f1", b"a"), (b"f2", b"b"), (b"f3", b"c")]
    w.cmd("HDEL", h, "f1")
    assert sorted_pairs(update(h)) == [(b"f2", b"b"), (b"f3", b"c")]
    w.cmd("LPUSH", lst, "first")
    assert update(lst) == [b"first", b"x", b"y", b"x"]
    w.cmd("RPOP", lst)
    assert update(lst) == [b"first", b"x", b"y"]
    w.cmd("SREM", st, "m1")
    assert update(st) == [b"m2"]
    w.cmd("ZINCRBY", z, "5", "one")
    assert update(z) == [b"two", b"2", b"one", b"6.5"]
    # a type change: the value is whatever the key holds now
    w.cmd("SET", lst, "now a string")
    assert update(lst) == b"now a string"
    nothing_more(sub)


@pytest.mark.parametrize("fill,empty", [
    (("SADD", "m"), ("SREM", "m")),
    (("SADD", "m"), ("SPOP",)),
    (("RPUSH", "m"), ("LPOP",)),
    (("RPUSH", "m"), ("LTRIM", "1", "0")),
    (("HSET", "f", "v"), ("HDEL", "f")),
    (("ZADD", "1", "m"), ("ZREM", "m")),
    (("SET", "v"), ("DEL",)),
    (("SET", "v"), ("GETDEL",)),
], ids=lambda c: c[0])
def test_emptying_a_collection_sends_one_nil(two, conns, p, fill, empty):
    """Removing the last member removes the key: one write, one frame."""
    key = p + "c"
    sub, w = conns(two, 0), conns(two, 1)
    w.cmd(fill[0], key, *fill[1:])
    watch = Watch(sub, key)
    assert watch.snapshot is not None
    w.cmd(empty[0], key, *empty[1:])
    assert watch.next() is None
    nothing_more(sub)


def test_resp3_pushes_keep_values_in_resp2_form(two, conns, p):
    key, h = p + "k", p + "h"
    sub, w = conns(two, 1), conns(two, 0)
    w.cmd("HSET", h, "f", "v")
    assert isinstance(sub.cmd("HELLO", "3"), dict)
    sub.send(encode("KSUBSCRIBE", key, h))
    assert sub.reply_bytes() == b">3\r\n$10\r\nksubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(key), key.encode())
    snap, raw = parsed_and_bytes(sub)
    assert isinstance(snap, Push) and snap[:2] == [b"kmessage", key.encode()] and snap[3] is None
    assert raw.startswith(b">4\r\n") and raw.endswith(b"_\r\n")
    assert sub.reply() == [b"ksubscribe", h.encode(), 2]
    hsnap, raw = parsed_and_bytes(sub)
    assert isinstance(hsnap, Push)
    # a flat array, not a RESP3 map
    assert raw.endswith(b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n")
    # RESP3 clients run any command while subscribed
    assert sub.cmd("GET", key) is None
    w.cmd("SET", key, "x")
    f = sub.reply()
    assert isinstance(f, Push) and f[:2] == [b"kmessage", key.encode()] and f[3] == b"x"


def memcached_line(server, line):
    """Sends one memcached text request; returns its reply line."""
    with socket.create_connection(("127.0.0.1", server.mc_port), timeout=10) as c:
        c.sendall(line)
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = c.recv(4096)
            assert chunk, f"memcached closed after {reply!r}"
            reply += chunk
        return reply


# (name, setup on worker 1, the write, the subscriber's next value). The
# subscriber watches "k" on worker 0; "src" is another key.
WRITES = [
    ("rename-to", [("SET", "src", "v")], ("RENAME", "src", "k"), b"v"),
    ("rename-from", [("SET", "k", "v")], ("RENAME", "k", "dst"), None),
    ("copy", [("SET", "src", "v")], ("COPY", "src", "k"), b"v"),
    ("move", [("SET", "k", "v")], ("MOVE", "k", "1"), None),
    ("setrange", [("SET", "k", "v")], ("SETRANGE", "k", "1", "xx"), b"vxx"),
    ("mset", [], ("MSET", "k", "m", "other", "o"), b"m"),
    ("setbit", [], ("SETBIT", "k", "1", "1"), b"@"),
    ("lmove", [("RPUSH", "src", "a")], ("LMOVE", "src", "k", "LEFT", "LEFT"), [b"a"]),
    ("sunionstore", [("SADD", "src", "a")], ("SUNIONSTORE", "k", "src"), [b"a"]),
    ("zunionstore", [("ZADD", "src", "1", "a")], ("ZUNIONSTORE", "k", "1", "src"), [b"a", b"1"]),
    ("hincrby", [], ("HINCRBY", "k", "f", "2"), [b"f", b"2"]),
    ("getset", [("SET", "k", "v")], ("GETSET", "k", "w"), b"w"),
    ("multi-exec", [], [("MULTI",), ("SET", "k", "tx"), ("EXEC",)], b"tx"),
    ("mc-incr", [("SET", "k", "5")], b"incr k 2\r\n", b"7"),
    ("mc-prepend", [("SET", "k", "5")], b"prepend k 0 0 1\r\np\r\n", b"p5"),
    ("mc-ms", [], b"ms k 2\r\nhi\r\n", b"hi"),
    ("mc-md", [("SET", "k", "5")], b"md k\r\n", None),
    ("mc-ma", [("SET", "k", "5")], b"ma k\r\n", b"6"),
    ("http-post", [], ("POST", "k", b"posted"), b"posted"),
    ("http-command", [], ("GET", "?set+k+viahttp", None), b"viahttp"),
]


@pytest.mark.parametrize("setup,write,want", [w[1:] for w in WRITES], ids=[w[0] for w in WRITES])
def test_every_kind_of_write_sends_the_new_value(two, conns, setup, write, want):
    sub, w = conns(two, 0), conns(two, 1)
    w.cmd("FLUSHALL")
    for cmd in setup:
        w.cmd(*cmd)
    watch = Watch(sub, "k")
    if isinstance(write, bytes):
        assert not memcached_line(two, write).startswith((b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR"))
    elif isinstance(write, list):
        assert not any(isinstance(r, Err) for r in w.pipeline(*write))
    elif write[0] in ("POST", "GET"):
        method, path, body = write
        r = requests.request(method, f"http://127.0.0.1:{two.http_port}/{path}", data=body, timeout=10)
        assert r.status_code < 300, r.status_code
    else:
        assert not isinstance(w.cmd(*write), Err)
    assert watch.next() == want
    nothing_more(sub)
    w.cmd("FLUSHALL")


@pytest.mark.parametrize("how", ["FLUSHALL", "FLUSHDB", "SWAPDB", "memcached flush_all"])
def test_flushing_the_db_sends_nil(two, conns, p, how):
    """The key is gone from the subscriber's db: its value is nil now."""
    key = p + "flush"
    sub, w = conns(two, 0), conns(two, 1)
    w.cmd("SET", key, "v")
    watch = Watch(sub, key)
    assert watch.snapshot == b"v"
    if how == "SWAPDB":
        assert w.cmd("SWAPDB", 0, 9) == "OK"
    elif how == "memcached flush_all":
        assert memcached_line(two, b"flush_all\r\n") == b"OK\r\n"
    else:
        assert w.cmd(how) == "OK"
    assert w.cmd("EXISTS", key) == 0
    assert watch.next() is None


# ---------------------------------------------------------------------------
# Patterns, databases, unsubscribing.


def test_kpsubscribe_lists_matching_keys_then_follows_new_ones(two, conns, p):
    w = conns(two, 1)
    # more keys than one page of the snapshot's scan
    existing = {f"{p}a:{i}": f"v{i}".encode() for i in range(2500)}
    w.pipeline(*[("SET", k, v) for k, v in existing.items()])
    w.cmd("SET", p + "b:other", "no")
    sub = conns(two, 0)
    pattern = p + "a:*"
    assert confirm(sub, "KPSUBSCRIBE", pattern) == [1]
    seen = {}
    reader = FrameReader(sub)
    for _ in existing:
        f = reader.frame()
        assert f[:2] == [b"kpmessage", pattern.encode()] and isinstance(f[3], int), f
        key = f[2].decode()
        assert key not in seen, f"{key} twice in the snapshot"
        seen[key] = f[4]
    reader.release()
    assert seen == existing
    nothing_more(sub)
    w.cmd("SET", p + "b:other", "still no")
    w.cmd("SET", p + "a:new", "fresh")
    f = sub.reply()
    assert f[0] == b"kpmessage" and f[1:3] == [pattern.encode(), (p + "a:new").encode()] and f[4] == b"fresh"
    w.cmd("DEL", p + "a:0")
    f = sub.reply()
    assert f[2] == (p + "a:0").encode() and f[4] is None
    nothing_more(sub)


def test_a_key_and_a_pattern_on_one_client_get_both_frames(two, conns, p):
    key = p + "both"
    sub, w = conns(two, 0), conns(two, 1)
    assert confirm(sub, "KSUBSCRIBE", key) == [1]
    assert sub.reply()[3] is None
    assert confirm(sub, "KPSUBSCRIBE", p + "*") == [2]
    nothing_more(sub)
    w.cmd("SET", key, "v")
    got = sorted([sub.reply(), sub.reply()], key=lambda f: f[0])
    assert got[0][0] == b"kmessage" and got[0][3] == b"v"
    assert got[1][:3] == [b"kpmessage", (p + "*").encode(), key.encode()] and got[1][4] == b"v"
    assert got[0][2] == got[1][3]


def test_the_selected_db_is_the_subscriptions_db(two, conns, p):
    key = p + "db"
    sub, w = conns(two, 0), conns(two, 1)
    assert w.cmd("SET", key, "in db 0") == "OK"
    assert w.cmd("SELECT", 3) == "OK"
    assert w.cmd("SET", key, "in db 3") == "OK"
    assert sub.cmd("SELECT", 3) == "OK"
    assert confirm(sub, "KSUBSCRIBE", key) == [1]
    assert sub.reply()[3] == b"in db 3"
    assert confirm(sub, "KPSUBSCRIBE", p + "*") == [2]
    f = sub.reply()
    assert f[2:] == [key.encode(), f[3], b"in db 3"]
    nothing_more(sub)
    assert w.cmd("SELECT", 0) == "OK"
    assert w.cmd("SET", key, "db 0 again") == "OK"
    assert w.cmd("SET", p + "other", "db 0 too") == "OK"
    assert w.cmd("SELECT", 3) == "OK"
    assert w.cmd("SET", key, "db 3 again") == "OK"
    # the db 0 writes came first from the same writer: had they been sent,
    # they would be here first
    got = [sub.reply(), sub.reply()]
    assert [f[0] for f in got] == [b"kmessage", b"kpmessage"] or \
        [f[0] for f in got] == [b"kpmessage", b"kmessage"]
    assert all(f[-1] == b"db 3 again" for f in got), got
    nothing_more(sub)


def test_unsubscribing_and_counts(two, conns, p):
    a, b = p + "a", p + "b"
    sub, w = conns(two, 0), conns(two, 1)
    assert sub.cmd("KUNSUBSCRIBE") == [b"kunsubscribe", None, 0]
    assert sub.cmd("KPUNSUBSCRIBE") == [b"kpunsubscribe", None, 0]
    assert confirm(sub, "SUBSCRIBE", p + "ch") == [1]
    sub.send(encode("KSUBSCRIBE", a, b))
    assert [sub.reply() for _ in range(4)][::2] == [[b"ksubscribe", a.encode(), 2],
                                                   [b"ksubscribe", b.encode(), 3]]
    assert confirm(sub, "KPSUBSCRIBE", p + "x*") == [4]
    assert sub.cmd("GET", a) == Err(CANT.format("get"))
    assert confirm(sub, "KUNSUBSCRIBE", a) == [3]
    w.cmd("SET", a, "not sent")
    w.cmd("SET", b, "sent")
    f = sub.reply()
    assert f[:2] == [b"kmessage", b.encode()] and f[3] == b"sent"
    assert sub.cmd("KUNSUBSCRIBE") == [b"kunsubscribe", b.encode(), 2]
    assert sub.cmd("KPUNSUBSCRIBE") == [b"kpunsubscribe", (p + "x*").encode(), 1]
    w.cmd("SET", b, "not sent either")
    w.cmd("SET", p + "x1", "nor this")
    assert confirm(sub, "UNSUBSCRIBE", p + "ch") == [0]
    # out of subscribed mode, and nothing was queued after the confirmations
    assert sub.cmd("PING") == "PONG"


def test_ksubscribe_twice_sends_one_snapshot(two, conns, p):
    key = p + "twice"
    sub = conns(two, 1)
    assert confirm(sub, "KSUBSCRIBE", key) == [1]
    assert sub.reply()[0] == b"kmessage"
    assert confirm(sub, "KSUBSCRIBE", key) == [1]
    nothing_more(sub)


def test_closed_subscribers_get_nothing_and_others_still_do(two, conns, p):
    key = p + "close"
    w = conns(two, 1)
    gone, stays = conns(two, 0), conns(two, 1)
    Watch(gone, key)
    watch = Watch(stays, key)
    gone.close()
    for i in range(3):
        w.cmd("SET", key, str(i))
        assert watch.next() == str(i).encode()


# ---------------------------------------------------------------------------
# Races: the last update is never lost.


@pytest.mark.parametrize("sub_slot", [0, 1], ids=["other-worker", "same-worker"])
def test_incr_at_full_speed_the_subscriber_sees_the_final_value(two, conns, p, sub_slot):
    """INCR pipelined on worker 1: the values the subscriber sees only grow,
    and the last is the final count."""
    key = p + "counter"
    sub, w = conns(two, sub_slot), conns(two, 1)
    watch = Watch(sub, key)
    n, batch = 30000, 500
    errors = []
    values = []

    def read():
        reader = FrameReader(sub)
        try:
            version = watch.version
            while True:
                f = reader.frame()
                assert f[:2] == [b"kmessage", key.encode()] and f[2] > version, (f, version)
                version = f[2]
                values.append(int(f[3]))
                if values[-1] == n:
                    return
        except Exception as e:  # reported by the test thread
            errors.append(e)
        finally:
            reader.release()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for start in range(0, n, batch):
        assert w.pipeline(*[("INCR", key)] * batch) == list(range(start + 1, start + batch + 1))
    reader.join(60)
    assert not reader.is_alive(), f"the subscriber never got {n}; last {values[-1:]}"
    assert not errors, errors
    assert all(a < b for a, b in zip(values, values[1:]))
    assert values[-1] == n
    settle(two, sub, p)


def settle(two, sub, p):
    """Checks nothing more comes for the watched keys: a write from each
    worker to a marker key of its own; every frame routed before from that
    worker arrives before the marker's."""
    markers = {}
    for slot in (0, 1):
        key = f"{p}marker{slot}"
        sub.send(encode("KSUBSCRIBE", key))
        assert sub.reply()[:2] == [b"ksubscribe", key.encode()]
        assert sub.reply()[:2] == [b"kmessage", key.encode()]
        markers[key] = slot
    for key, slot in markers.items():
        with raw_on_worker(two, slot) as c:
            c.cmd("SET", key, "done")
    for _ in markers:
        f = sub.reply()
        assert f[0] == b"kmessage" and f[1].decode() in markers and f[3] == b"done", \
            f"a frame after the last write: {f}"


def test_set_and_del_racing_on_both_workers_end_in_the_final_state(two, conns, p):
    """Two writers on different workers, one SETting and one DELeting the
    same key at full speed; once both stop, the subscriber's last frame
    must be the key's final state (a value or nil)."""
    for r in range(8):
        key = f"{p}race{r}"
        sub = conns(two, r % 2)
        watch = Watch(sub, key)
        setter, deleter = conns(two, 0), conns(two, 1)
        errors = []

        def run(conn, make):
            try:
                for start in range(0, 4000, 200):
                    conn.pipeline(*[make(i) for i in range(start, start + 200)])
            except Exception as e:  # reported by the test thread
                errors.append(e)

        writers = [threading.Thread(target=run, args=(setter, lambda i: ("SET", key, f"v{i}")), daemon=True),
                   threading.Thread(target=run, args=(deleter, lambda i: ("DEL", key)), daemon=True)]
        got = []
        stop = threading.Event()

        def read():
            try:
                while not stop.is_set() or readable(sub):
                    if readable(sub):
                        got.append(watch.next())
                    else:
                        select.select([sub.sock], [], [], 0.05)
            except Exception as e:  # reported by the test thread
                errors.append(e)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for t in writers:
            t.start()
        for t in writers:
            t.join(60)
        final = setter.cmd("GET", key)
        # the last frame must come to the final state; wait until it does
        wait_for(lambda: got and got[-1] == final, what=f"round {r}: a frame with the final state {final!r}"
                 f" (last frames {got[-3:]})")
        stop.set()
        reader.join(30)
        assert not errors, errors
        settle(two, sub, f"{p}{r}:")
        assert setter.cmd("GET", key) == final
