"""Keyspace notifications (`notify-keyspace-events`), differentially: the
same commands run against a real redis-server 7.0 and a two-worker shoal,
each watched by a `PSUBSCRIBE __key*__:*` subscriber, and the (channel,
message) pairs each command caused must be the same, in the same order.

After every command the writer publishes a token on a channel the watcher
also subscribes to; the watcher's events up to that token are the
command's. Expiry and eviction happen when the servers decide, so those
tests wait for the events instead and compare what arrived.

With SHOAL_TEST_TARGET=redis both sides are redis-server, which checks the
scripts themselves."""

import socket
import time
import uuid

import pytest

from shoaltest import Server, raw_on_worker, wait_for, worker_slot

SYNC = "__sync__"

# Every write of every type, with misses, empty results and deletes. Lines
# are commands; a comment line starts with '#'.
SCRIPT = """
# strings
SET a 1
SET a 2 EX 100
SET a 3 KEEPTTL
SET a 4 NX
SET a 5 XX GET
SET b 5 XX
SET c 1 EX 0
SETNX a 1
SETNX d 1
SETEX e 100 v
PSETEX f 100000 v
GETSET a 9
GETSET g 9
GETDEL a
GETDEL a
GETEX d EX 100
GETEX d PERSIST
GETEX d PERSIST
GETEX d PXAT 1
GETEX nosuch EX 10
GETEX g
MSET a 1 b 2 a 3
MSETNX x 1 y 2
MSETNX x 1 z 2
MSETNX w 1
APPEND a 1
APPEND n 1
INCR i
DECR i
INCRBY i 5
DECRBY i 5
INCRBYFLOAT i 1.5
INCR fresh
SET s abc
INCR s
SETRANGE s 1 X
SETRANGE s3 2 x
SETRANGE s 0 ""
SETRANGE s4 0 ""
GET nope
GET s
MGET s nope nope2 l
STRLEN nope
GETRANGE nope 0 1
GETRANGE s 0 1
GETRANGE nope -1 -5
LCS nope s
SETBIT bt 7 1
SETBIT bt 7 1
SETBIT bt 100 0
GETBIT bt 7
GETBIT nope 7
BITCOUNT nope
BITPOS nope 1
BITOP AND bd bt s
BITOP AND bd nosuch1 nosuch2
BITOP AND bd2 nosuch1 nosuch2
BITOP NOT bd3 bt
# lists
LPUSH l a b c
RPUSH l d
LPUSHX nol a
RPUSHX l e
LPUSHX l z
LINSERT l BEFORE a X
LINSERT l BEFORE nothere X
LINSERT nol BEFORE a X
LSET l 0 Q
LREM l 1 Q
LREM l 1 nothere
LTRIM l 0 -1
LTRIM l 1 -1
LTRIM nol 0 1
LPOP l
RPOP l 2
LPOP l 0
LPOP nol
LMOVE l l2 LEFT RIGHT
RPOPLPUSH l l2
LMPOP 2 nol l LEFT COUNT 10
LMOVE l2 l2 LEFT LEFT
LMOVE l2 l3 LEFT LEFT
LMOVE l3 l4 RIGHT RIGHT
LMOVE nol l4 RIGHT RIGHT
LPOS l2 a
LPOS nol a
LRANGE nol 0 -1
LRANGE l4 0 -1
LLEN nol
LINDEX nol 0
RPUSH t a b
LTRIM t 5 10
RPUSH t a b
LREM t 0 a
LREM t 0 b
RPUSH t a
BLPOP t 1
RPUSH t a b
BRPOP t 1
BLMOVE t t5 LEFT LEFT 1
BRPOPLPUSH t5 t6 1
BLMPOP 1 2 nol t6 RIGHT COUNT 5
# hashes
HSET h a 1 b 2
HSET h a 1
HMSET h c 3
HSETNX h a 5
HSETNX h z 5
HDEL h a nothere
HDEL h nothere
HDEL noh a
HINCRBY h n 1
HINCRBYFLOAT h f 1.5
HINCRBY h2 n 1
HINCRBYFLOAT h3 f 1.5
HDEL h b c z n f
HGET nohash a
HGET h2 nofield
HGETALL nohash
HMGET nohash a b
HLEN nohash
HEXISTS nohash a
HSTRLEN nohash a
HKEYS nohash
HVALS nohash
HRANDFIELD nohash
HRANDFIELD nohash 2
HSCAN nohash 0
# sets
SADD s1 a b c
SADD s1 a
SREM s1 a x
SREM s1 x
SREM nos x
SMOVE s1 s2 b
SMOVE s1 s2 c
SMOVE s2 s2 b
SMOVE nos s2 b
SADD s3x a
SMOVE s3x s2 b
SADD s3x b
SMOVE s3x s2 b
SADD s1 a b c d e
SPOP s1
SPOP s1 2
SPOP s1 0
SPOP s1 5
SPOP s1
SADD s1 a b c
SADD t1 c d
SINTERSTORE d s1 t1
SUNIONSTORE d s1 t1
SDIFFSTORE d s1 t1
SINTERSTORE d s1 nos
SINTERSTORE d s1 nos
SDIFFSTORE e2 s1 nos
SUNIONSTORE e3 nos nos2
SMEMBERS nos
SISMEMBER nos a
SMISMEMBER nos a b
SINTER s1 nos
SINTERCARD 2 s1 nos
SUNION s1 nos nos2
SDIFF nos s1
SCARD nos
SRANDMEMBER nos
SRANDMEMBER nos 3
SSCAN nos 0
# sorted sets
ZADD z 1 a 2 b 3 c
ZADD z 1 a
ZADD z 5 a
ZADD z INCR 1 a
ZADD z NX 1 a
ZADD z XX 1 q
ZADD noz XX 1 q
ZADD z GT CH 10 a
ZADD z LT 100 a
ZINCRBY z 1 b
ZINCRBY z 1 new
ZINCRBY z2x 1 new
ZREM z new nothere
ZREM z nothere
ZREMRANGEBYRANK z 0 0
ZREMRANGEBYRANK z 10 20
ZREMRANGEBYSCORE z 0 1
ZADD lz 0 a 0 b 0 c
ZREMRANGEBYLEX lz [a [a
ZREMRANGEBYLEX lz - +
ZADD z 1 x 2 y 3 w
ZPOPMIN z
ZPOPMAX z 2
ZPOPMIN z 0
ZPOPMIN noz
ZMPOP 1 z MIN COUNT 10
ZADD z 1 x 2 y 3 w
ZADD z2 1 y
ZUNIONSTORE d 2 z z2
ZINTERSTORE d 2 z z2
ZDIFFSTORE d 2 z z2
ZINTERSTORE d 2 z noz
ZINTERSTORE d 2 z noz
ZUNIONSTORE d2 2 noz noz2
ZRANGESTORE d z 0 -1
ZRANGESTORE d z 5 6
ZRANGESTORE d z 5 6
ZRANGESTORE d3 noz 0 -1
BZPOPMIN z2 1
BZMPOP 1 1 z MAX COUNT 2
ZSCORE noz a
ZMSCORE noz a b
ZRANGE noz 0 -1
ZRANGEBYSCORE noz 0 1
ZREVRANGE noz 0 1
ZCARD noz
ZCOUNT noz 0 1
ZLEXCOUNT noz - +
ZUNION 2 z noz
ZINTER 2 z noz
ZDIFF 2 noz z
ZINTERCARD 2 z noz
ZRANK noz a
ZREVRANK noz a
ZRANDMEMBER noz
ZRANDMEMBER noz 2
ZSCAN noz 0
# keys
SET k1 1
SET k2 2
DEL k1 k2 nothere
SET k1 1
UNLINK k1 nothere
SET k1 1
EXPIRE k1 100
EXPIRE k1 100 NX
EXPIRE k1 200 XX
EXPIRE k1 100 GT
PEXPIRE k1 100000
EXPIREAT k1 9999999999
PEXPIREAT k1 9999999999000
EXPIRE nothere 100
PERSIST k1
PERSIST k1
PERSIST nothere
EXPIRE k1 0
SET k1 1
PEXPIREAT k1 1
SET k1 1
EXPIRE k1 -5
SET k1 1
RENAME k1 k2
SET k1 2
RENAME k1 k2
RENAME k2 k2
RENAMENX k2 k3
SET k4 1
RENAMENX k3 k4
RENAME nothere k5
MOVE k3 1
MOVE k4 1
SET k4 1
MOVE k4 1
MOVE nothere 1
COPY k4 k6
COPY k4 k6
COPY k4 k6 REPLACE
COPY k4 k6 DB 2
COPY nothere k6
LPUSH kl a
RENAME kl kl2
EXISTS nothere k4
TYPE nothere
TTL nothere
PTTL nothere
TOUCH nothere k4
OBJECT ENCODING nothere
EXPIRETIME nothere
PEXPIRETIME nothere
KEYS *
SCAN 0
RANDOMKEY
DBSIZE
MULTI
SET m1 1
LPUSH m2 a
DEL m1
EXEC
SELECT 1
SET k1 v
LPUSH l1 v
DEL k1
SWAPDB 0 1
SELECT 0
DEL l1
FLUSHDB
FLUSHALL
"""


def parse_script(text):
    """Commands of a script: whitespace-separated words, `""` for an empty
    argument."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(["" if w == '""' else w for w in line.split()])
    return out


def as_text(x):
    return x.decode() if isinstance(x, bytes) else x


class Watcher:
    """A subscriber to every keyspace and keyevent channel (and to the sync
    channel)."""

    def __init__(self, conn):
        self.conn = conn
        conn.cmd("PSUBSCRIBE", "__key*__:*")
        conn.cmd("SUBSCRIBE", SYNC)

    def until(self, writer, token=None):
        """The events that arrive before the writer's next sync token."""
        token = token or uuid.uuid4().hex
        writer.cmd("PUBLISH", SYNC, token)
        events = []
        while True:
            m = self.conn.reply()
            if m[0] == b"message" and as_text(m[1]) == SYNC:
                if as_text(m[2]) == token:
                    return events
                continue
            assert m[0] == b"pmessage", m
            events.append((as_text(m[2]), as_text(m[3])))

    def wait(self, pred, timeout=20.0):
        """Reads events until `pred(events so far)` holds; returns them."""
        self.conn.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        events = []
        while not pred(events):
            assert time.monotonic() < deadline, f"timed out; got {events}"
            m = self.conn.reply()
            if m[0] == b"pmessage":
                events.append((as_text(m[2]), as_text(m[3])))
        return events


class Side:
    """One server under test: a writer and a watcher on it."""

    def __init__(self, server, flags):
        self.server = server
        self.writer = server.raw()
        self.writer.cmd("FLUSHALL")
        self.watcher = Watcher(server.raw())
        assert self.writer.cmd("CONFIG", "SET", "notify-keyspace-events", flags) == "OK"
        # Nothing left from before the flags changed.
        self.watcher.until(self.writer)

    def run(self, commands):
        """[(command, reply, events it caused)] for each command."""
        out = []
        queued = False
        for c in commands:
            reply = self.writer.cmd(*c)
            name = c[0].upper()
            queued = (queued or name == "MULTI") and name not in ("EXEC", "DISCARD")
            # Inside MULTI the token would be queued too: EXEC's events are
            # all the transaction's.
            events = [] if queued else self.watcher.until(self.writer)
            out.append((" ".join(c), reply, events))
        return out

    def close(self):
        self.writer.cmd("CONFIG", "SET", "notify-keyspace-events", "")
        self.writer.cmd("FLUSHALL")
        self.writer.close()
        self.watcher.conn.close()


@pytest.fixture(scope="module")
def redis_srv():
    s = Server(kind="redis").start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def shoal_srv():
    s = Server(workers=2).start()
    yield s
    s.stop()


@pytest.fixture
def sides(redis_srv, shoal_srv):
    """`open(flags)` -> (redis side, shoal side); closed at teardown."""
    opened = []

    def open_(flags):
        pair = (Side(redis_srv, flags), Side(shoal_srv, flags))
        opened.extend(pair)
        return pair

    yield open_
    for s in opened:
        s.close()


def compare(flags, sides, commands, expect_events=True):
    """Runs `commands` on both servers; each command's events must match."""
    ref, got = sides(flags)
    want = ref.run(commands)
    have = got.run(commands)
    for (cmd, reply, events), (_, shoal_reply, shoal_events) in zip(want, have):
        assert shoal_events == events, (
            f"{cmd!r} with {flags!r}: redis replied {reply!r} and sent {events}, "
            f"shoal replied {shoal_reply!r} and sent {shoal_events}")
    if expect_events:
        assert any(events for _, _, events in want), f"{flags!r} produced no events at all"
    return want


# ---------------------------------------------------------------------------
# Class by class, through the whole script.

FLAG_GROUPS = ["Kg", "Eg", "K$", "E$", "Kl", "El", "Ks", "Es", "Kh", "Eh", "Kz", "Ez",
               "Km", "Em", "Kn", "En", "KA", "EA", "AKE", "KEg$lshzxenm", "g$"]


@pytest.mark.parametrize("flags", FLAG_GROUPS)
def test_every_write_sends_redis_events(sides, flags):
    compare(flags, sides, parse_script(SCRIPT), expect_events=flags != "g$")


def test_no_flags_no_events(sides):
    ref, got = sides("")
    for side in (ref, got):
        assert all(not ev for _, _, ev in side.run(parse_script(SCRIPT)))


def test_new_and_keymiss_around_expired_keys(sides):
    """A write to an expired key: "expired", then the write's "keymiss"
    (GETSET reads first), "new", and its own event."""
    steps = [["SET", "gs", "1", "PX", "30"], ["SET", "ap", "1", "PX", "30"],
             ["RPUSH", "li", "a"], ["PEXPIRE", "li", "30"]]
    later = [["GETSET", "gs", "2"], ["APPEND", "ap", "x"], ["LPUSHX", "li", "b"],
             ["RPUSH", "li", "c"]]
    ref, got = sides("KEA" + "nm")
    for side in (ref, got):
        side.run(steps)
    time.sleep(0.05)
    # Either server may have swept a key by now (its "expired" then arrives
    # earlier, on its own): compare each key's events as a whole.
    want = ref.run(later)
    have = got.run(later)
    for (cmd, _, events), (_, _, shoal_events) in zip(want, have):
        assert not_expired(shoal_events) == not_expired(events), (cmd, events, shoal_events)
    assert [not_expired(ev) for _, _, ev in want] == [
        [("__keyspace@0__:gs", "keymiss"), ("__keyevent@0__:keymiss", "gs"),
         ("__keyspace@0__:gs", "new"), ("__keyevent@0__:new", "gs"),
         ("__keyspace@0__:gs", "set"), ("__keyevent@0__:set", "gs")],
        [("__keyspace@0__:ap", "new"), ("__keyevent@0__:new", "ap"),
         ("__keyspace@0__:ap", "append"), ("__keyevent@0__:append", "ap")],
        [],
        [("__keyspace@0__:li", "new"), ("__keyevent@0__:new", "li"),
         ("__keyspace@0__:li", "rpush"), ("__keyevent@0__:rpush", "li")]]


def not_expired(events):
    return [e for e in events if not any(part.endswith("expired") for part in e)]


# ---------------------------------------------------------------------------
# x: expiry, on access and by the sweeper.


def expired_events(key, db=0):
    return sorted([(f"__keyspace@{db}__:{key}", "expired"),
                   (f"__keyevent@{db}__:expired", key)])


def test_expired_on_access_and_by_the_sweeper(sides):
    ref, got = sides("KEx")
    for side in (ref, got):
        w = side.writer
        assert w.cmd("SET", "read", "v", "PX", "20") == "OK"
        assert w.cmd("SET", "swept", "v", "PX", "20") == "OK"
        assert w.cmd("SET", "stays", "v", "PX", "100000") == "OK"
        # Only expiry is selected: the writes sent nothing.
        assert side.watcher.until(w) == []
    time.sleep(0.05)
    for side in (ref, got):
        assert side.writer.cmd("GET", "read") is None
        # "read" expires now if no sweeper was first; "swept" when a
        # sweeper reaches it.
        events = side.watcher.wait(lambda ev: len(ev) >= 4)
        assert sorted(events) == sorted(expired_events("read") + expired_events("swept"))
        assert side.writer.cmd("EXISTS", "stays") == 1


def test_expired_in_the_db_clients_name_after_swapdb(sides):
    ref, got = sides("Kx")
    for side in (ref, got):
        w = side.writer
        w.cmd("SELECT", "3")
        w.cmd("SET", "k", "v", "PX", "20")
        w.cmd("SWAPDB", "3", "5")
        w.cmd("SELECT", "0")
    time.sleep(0.05)
    for side in (ref, got):
        side.writer.cmd("SELECT", "5")
        assert side.writer.cmd("GET", "k") is None
        side.writer.cmd("SELECT", "0")
        assert side.watcher.wait(lambda ev: len(ev) >= 1) == [("__keyspace@5__:k", "expired")]


def test_a_set_with_a_time_already_past(sides):
    """Redis keeps such a key until it is looked at or swept; shoal deletes
    it at once. Either way: "set", "expire", then "expired"."""
    ref, got = sides("KEA")
    for side in (ref, got):
        side.writer.cmd("SET", "past", "v", "PXAT", "1")
        events = side.watcher.wait(lambda ev: ("__keyevent@0__:expired", "past") in ev)
        assert events == [("__keyspace@0__:past", "set"), ("__keyevent@0__:set", "past"),
                          ("__keyspace@0__:past", "expire"), ("__keyevent@0__:expire", "past"),
                          ("__keyspace@0__:past", "expired"), ("__keyevent@0__:expired", "past")]


def beside(server, conn):
    """Another connection to the worker serving `conn` (on shoal), so that
    what both publish reaches a subscriber in the order it happened."""
    if server.kind != "shoal":
        return server.raw()
    return raw_on_worker(server, worker_slot(conn))


def test_blocked_pop_served_by_a_push(sides):
    ref, got = sides("KEA")
    for side in (ref, got):
        blocked = beside(side.server, side.writer)
        blocked.send(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n")
        wait_for(lambda: b"cmd=blpop" in side.writer.cmd("CLIENT", "LIST"),
                 what="BLPOP to block")
        assert side.writer.cmd("RPUSH", "q", "x") == 1
        assert blocked.reply() == [b"q", b"x"]
        blocked.close()
        events = side.watcher.wait(lambda ev: len(ev) >= 6)
        assert events == [("__keyspace@0__:q", "rpush"), ("__keyevent@0__:rpush", "q"),
                          ("__keyspace@0__:q", "lpop"), ("__keyevent@0__:lpop", "q"),
                          ("__keyspace@0__:q", "del"), ("__keyevent@0__:del", "q")]


# ---------------------------------------------------------------------------
# e: eviction.


def info_stat(conn, name):
    text = as_text(conn.cmd("INFO", "stats"))
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"no {name} in INFO stats")


@pytest.mark.parametrize("flags", ["Ee", "Ke"])
def test_evicted_keys_are_announced(make_server, flags):
    value = "x" * 1000
    for server in (make_server(kind="redis"), make_server(workers=2)):
        w = server.raw()
        watcher = Watcher(server.raw())
        w.cmd("CONFIG", "SET", "notify-keyspace-events", flags)
        used = info_stat_memory(w, server.kind)
        w.cmd("CONFIG", "SET", "maxmemory", str(used + (2 << 20)))
        w.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        before = info_stat(w, "evicted_keys")
        for i in range(0, 6000, 100):
            assert w.pipeline(*[("SET", f"key:{j}", value) for j in range(i, i + 100)]) \
                == ["OK"] * 100
        evicted = info_stat(w, "evicted_keys") - before
        assert evicted > 0, f"{server.kind}: 2 MB cannot hold 6 MB"
        events = watcher.wait(lambda ev: len(ev) >= evicted)
        assert len(events) == evicted, server.kind
        keys = set()
        for channel, message in events:
            if flags == "Ee":
                assert channel == "__keyevent@0__:evicted"
                key = message
            else:
                assert message == "evicted" and channel.startswith("__keyspace@0__:")
                key = channel[len("__keyspace@0__:"):]
            keys.add(key)
        assert len(keys) == evicted, f"{server.kind}: a key was announced twice"
        assert w.cmd("EXISTS", *keys) == 0
        w.cmd("CONFIG", "SET", "maxmemory", "0")
        w.close()
        watcher.conn.close()


def info_stat_memory(conn, kind):
    """Memory in use now as maxmemory counts it: used_memory on both (shoal
    reports its segment's fixed structures apart, in shoal_fixed_bytes)."""
    field = "used_memory:"
    text = as_text(conn.cmd("INFO", "memory"))
    for line in text.splitlines():
        if line.startswith(field):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"no {field} in INFO memory")


# ---------------------------------------------------------------------------
# shoal only: across workers, and memcached writes.


@pytest.mark.shoal_only
def test_events_cross_workers(shoal_srv):
    writer = raw_on_worker(shoal_srv, 0)
    watcher = Watcher(raw_on_worker(shoal_srv, 1))
    try:
        writer.cmd("CONFIG", "SET", "notify-keyspace-events", "KEA")
        writer.cmd("SET", "cross", "1")
        writer.cmd("LPUSH", "crossl", "a")
        writer.cmd("DEL", "cross", "crossl")
        assert watcher.until(writer) == [
            ("__keyspace@0__:cross", "set"), ("__keyevent@0__:set", "cross"),
            ("__keyspace@0__:crossl", "lpush"), ("__keyevent@0__:lpush", "crossl"),
            ("__keyspace@0__:cross", "del"), ("__keyevent@0__:del", "cross"),
            ("__keyspace@0__:crossl", "del"), ("__keyevent@0__:del", "crossl")]
    finally:
        writer.cmd("CONFIG", "SET", "notify-keyspace-events", "")
        writer.close()
        watcher.conn.close()


def mc(port, *lines):
    """Sends memcached text lines on one connection, then a get of a missing
    key whose "keymiss" marks the end of what they caused; returns the
    replies."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"".join(line + b"\r\n" for line in lines) + b"get " + MC_MARK.encode()
                  + b"\r\nmn\r\n")
        buf = b""
        while not buf.endswith(b"MN\r\n"):
            chunk = s.recv(65536)
            assert chunk, buf
            buf += chunk
        return buf


MC_MARK = "__mc_mark__"

# Each memcached command and the Redis command whose events it must send
# (PING: none).
MEMCACHED = [
    ([b"set k 0 0 1", b"v"], ["SET", "k", "v"]),
    ([b"set k 0 100 1", b"v"], ["SET", "k", "v", "EX", "100"]),
    ([b"add k 0 0 1", b"v"], ["SET", "k", "v", "NX"]),
    ([b"add k2 0 0 1", b"v"], ["SET", "k2", "v", "NX"]),
    ([b"replace k 0 0 1", b"w"], ["SET", "k", "w", "XX"]),
    ([b"replace nok 0 0 1", b"w"], ["SET", "nok", "w", "XX"]),
    ([b"append k 0 0 1", b"a"], ["APPEND", "k", "a"]),
    ([b"prepend k 0 0 1", b"p"], ["APPEND", "k", "p"]),
    ([b"append nok 0 0 1", b"a"], ["PING"]),
    ([b"set n 0 0 1", b"5"], ["SET", "n", "5"]),
    ([b"incr n 3"], ["INCRBY", "n", "3"]),
    ([b"decr n 2"], ["DECRBY", "n", "2"]),
    ([b"incr nok 1"], ["PING"]),
    ([b"touch n 100"], ["EXPIRE", "n", "100"]),
    ([b"touch n 0"], ["PERSIST", "n"]),
    ([b"touch nok 100"], ["EXPIRE", "nok", "100"]),
    ([b"get missing"], ["GET", "missing"]),
    ([b"get k"], ["GET", "k"]),
    ([b"delete k"], ["DEL", "k"]),
    ([b"delete k"], ["DEL", "k"]),
    ([b"touch n -1"], ["EXPIRE", "n", "-1"]),
    ([b"set e 0 -1 1", b"v"], ["SET", "e", "v", "PXAT", "1"]),
    ([b"flush_all"], ["FLUSHALL"]),
]


@pytest.mark.shoal_only
def test_memcached_writes_send_their_redis_kins_events(sides, shoal_srv):
    mark = [(f"__keyspace@0__:{MC_MARK}", "keymiss"), ("__keyevent@0__:keymiss", MC_MARK)]
    ref, got = sides("KEAnm")
    for mc_lines, redis_cmd in MEMCACHED:
        want = ref.run([redis_cmd])[0][2]
        if redis_cmd[-2:] == ["PXAT", "1"]:
            # Redis expires the key when it gets to it; shoal at once.
            want += ref.watcher.wait(lambda ev: len(ev) >= 2)
        mc(shoal_srv.mc_port, *mc_lines)
        have = got.watcher.wait(lambda ev: ev[-2:] == mark)[:-2]
        assert have == want, (mc_lines, redis_cmd, want, have)
