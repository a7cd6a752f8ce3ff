"""Durability end to end (issue 7, docs/persistence.md): `shoal serve --dir` logs
every write of every protocol; after a crash of every process and the loss
of the segment (what a reboot does to /dev/shm) a restart on the same
directory brings every acknowledged write back exactly, TTLs included;
snapshots taken while writers run (fuzzy) plus the log replayed after them
give the same state; a surviving segment is attached without replay;
`appendfsync always` answers a write only after the fsync that covers it;
SAVE, BGSAVE, LASTSAVE, INFO persistence and CONFIG appendfsync.

Every server here has its own ports, segment and directory (`tmp_path`),
and is killed at teardown. Nothing is timed: the tests wait for states
(a key gone, the log written out, a snapshot counted) and compare contents.
"""

import os
import random
import re
import signal
import socket
import struct
import subprocess
import time

import pytest
import redis
import requests
from pymemcache.client.base import Client as McClient

from shoaltest import (SHOAL_BIN, Err, encode, fast_pipeline, info_section,
                       raw_on_worker, state_diff, store_state, wait_for)

pytestmark = pytest.mark.shoal_only

DAY_MS = 86_400_000
# The server's clock is read once per event-loop turn, so an expiry it
# computes may trail the client's clock by a little: allowance for that,
# not for speed.
CLOCK_SLACK_MS = 1000


def now_ms():
    return int(time.time() * 1000)


def persistence(server):
    with server.raw() as c:
        return info_section(c, "persistence")


def wait_log_written(server):
    """Waits until the log writer has written every reserved frame to the
    files (written LSN reaches the head): after that a SIGKILL loses
    nothing that the page cache holds, whatever the fsync policy."""
    with server.raw() as c:
        def written():
            p = info_section(c, "persistence")
            return int(p["shoal_log_written_lsn"]) >= int(p["shoal_log_head_lsn"])
        wait_for(written, timeout=30, what="the log writer to catch up with the ring")


def mc_get_with_flags(port, key):
    """(flags, value) of a key through the memcached text protocol, or None."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"get " + key + b"\r\n")
        buf = b""
        while not (buf.endswith(b"END\r\n")):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("memcached connection closed")
            buf += chunk
    if buf == b"END\r\n":
        return None
    head, rest = buf.split(b"\r\n", 1)
    _, k, flags, n = head.split()[:4]
    assert k == key
    return int(flags), rest[:int(n)]


# ---------------------------------------------------------------------------
# The expected state, kept by the test from what it wrote and the replies.


class Model:
    """{(db, key): (type, value, expiry)} in store_state's shapes; expiry is
    -1 or a (low, high) window of absolute ms from the client's clock."""

    def __init__(self):
        self.keys = {}

    def put(self, db, key, typ, value, exp=-1):
        self.keys[(db, key)] = (typ, value, exp)

    def drop(self, db, key):
        self.keys.pop((db, key), None)

    def check(self, state, what):
        """Fails with the differences unless `state` (from store_state)
        holds exactly the modelled keys and values."""
        problems = []
        for k in sorted(set(self.keys) | set(state), key=repr):
            want, got = self.keys.get(k), state.get(k)
            if want is None or got is None:
                problems.append(f"{k!r}: want {want!r:.200}, got {got!r:.200}")
                continue
            wt, wv, we = want
            gt, gv, ge = got
            if wt == "zset" and gt == "zset":
                gv = [(m, float(s)) for m, s in gv]
            if (wt, wv) != (gt, gv):
                problems.append(f"{k!r}: want {wt} {wv!r:.200}, got {gt} {gv!r:.200}")
            elif we == -1:
                if ge != -1:
                    problems.append(f"{k!r}: want no expiry, got PEXPIRETIME {ge}")
            elif not (we[0] - CLOCK_SLACK_MS <= ge <= we[1]):
                problems.append(f"{k!r}: want expiry within {we}, got PEXPIRETIME {ge}")
        assert not problems, f"{what}:\n" + "\n".join(problems[:30])


def zsorted(members):
    """A zset dict as ZRANGE WITHSCORES orders it: by score, then member."""
    return sorted(members.items(), key=lambda ms: (ms[1], ms[0]))


def write_everything(s):
    """Writes through RESP (redis-py), memcached text (pymemcache) and HTTP
    (requests), covering every kind of record; returns (Model, keys that
    must expire while the server is down with their deadlines)."""
    m = Model()
    r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=30)
    try:
        # Strings, binary values, TTLs.
        binary = bytes(range(256)) + b"\r\n\x00end"
        assert r.set("s:plain", "hello")
        assert r.set("s:bin", binary)
        m.put(0, b"s:plain", "string", b"hello")
        m.put(0, b"s:bin", "string", binary)
        big = os.urandom(3 << 20)  # more than one frame's chunk, most likely
        assert r.set("s:big", big)
        m.put(0, b"s:big", "string", big)
        t0 = now_ms()
        assert r.set("s:ex", "e", ex=1000)
        assert r.set("s:px", "p", px=2_000_000)
        t1 = now_ms()
        m.put(0, b"s:ex", "string", b"e", (t0 + 1_000_000, t1 + 1_000_000))
        m.put(0, b"s:px", "string", b"p", (t0 + 2_000_000, t1 + 2_000_000))
        assert r.set("s:persist", "v", ex=1000)
        assert r.persist("s:persist")
        m.put(0, b"s:persist", "string", b"v")
        assert r.set("s:expire", "v")
        t0 = now_ms()
        assert r.expire("s:expire", 1000)
        t1 = now_ms()
        m.put(0, b"s:expire", "string", b"v", (t0 + 1_000_000, t1 + 1_000_000))
        assert r.set("s:gone", "soon")
        assert r.pexpire("s:gone", 300)
        wait_for(lambda: r.exists("s:gone") == 0, what="s:gone to expire")
        # Counters and in-place string changes.
        assert [r.incr("n:incr") for _ in range(3)] == [1, 2, 3]
        assert r.incrby("n:incr", 10) == 13
        m.put(0, b"n:incr", "string", b"13")
        f1 = r.incrbyfloat("n:float", 1.5)
        with s.raw() as c:  # redis-py turns the reply into a float
            f2 = c.cmd("INCRBYFLOAT", "n:float", "0.1")
        assert f1 == 1.5 and f2 == b"1.6"
        m.put(0, b"n:float", "string", f2)
        assert r.append("s:app", b"abc") == 3
        assert r.append("s:app", b"\x00def") == 7
        m.put(0, b"s:app", "string", b"abc\x00def")
        assert r.setrange("s:range", 5, b"xyz") == 8
        m.put(0, b"s:range", "string", b"\x00" * 5 + b"xyz")
        # Lists.
        assert r.rpush("l:list", "a", "b", "c") == 3
        assert r.lpush("l:list", "z", b"\x00y") == 5
        assert r.rpop("l:list") == b"c"
        assert r.lpop("l:list") == b"\x00y"
        m.put(0, b"l:list", "list", [b"z", b"a", b"b"])
        many = [b"item-%d" % i for i in range(20_000)]
        for i in range(0, len(many), 1000):
            r.rpush("l:long", *many[i:i + 1000])
        assert r.ltrim("l:long", 1, -2)
        m.put(0, b"l:long", "list", many[1:-1])
        # Hashes.
        assert r.hset("h:hash", mapping={"f1": "v1", "f2": "v2", "bin": b"\x00\xff"}) == 3
        assert r.hdel("h:hash", "f2") == 1
        assert r.hincrby("h:hash", "cnt", 5) == 5
        m.put(0, b"h:hash", "hash", sorted([(b"f1", b"v1"), (b"bin", b"\x00\xff"), (b"cnt", b"5")]))
        fields = {b"f%05d" % i: b"v%d" % i for i in range(5000)}
        r.hset("h:big", mapping=fields)
        m.put(0, b"h:big", "hash", sorted(fields.items()))
        # Sets.
        assert r.sadd("set:s", "a", "b", "c", "d", "e") == 5
        assert r.srem("set:s", "d") == 1
        popped = r.spop("set:s")
        assert popped in (b"a", b"b", b"c", b"e")
        m.put(0, b"set:s", "set", sorted({b"a", b"b", b"c", b"e"} - {popped}))
        # Sorted sets with float scores.
        assert r.zadd("z:z", {"a": 1.5, "b": 2.25, "c": -3e10, "d": 0.1, "e": 1e-7}) == 5
        d_score = r.zincrby("z:z", 0.2, "d")
        assert r.zrem("z:z", "a") == 1
        m.put(0, b"z:z", "zset", zsorted({b"b": 2.25, b"c": -3e10, b"d": d_score, b"e": 1e-7}))
        # Key moves and copies.
        assert r.set("s:torename", "r")
        assert r.rename("s:torename", "s:renamed")
        m.put(0, b"s:renamed", "string", b"r")
        assert r.copy("h:hash", "h:copy")
        m.put(0, b"h:copy", *m.keys[(0, b"h:hash")][:2])
        assert r.set("s:tomove", "m", ex=1000)
        t1 = now_ms()
        assert r.move("s:tomove", 1)
        m.put(1, b"s:tomove", "string", b"m", (t1 - 1000 + 1_000_000, now_ms() + 1_000_000))
        assert r.set("s:del", "d") and r.delete("s:del") == 1
        # Another db flushed, two swapped.
        r2 = redis.Redis(host="127.0.0.1", port=s.port, db=2, socket_timeout=30)
        r4 = redis.Redis(host="127.0.0.1", port=s.port, db=4, socket_timeout=30)
        r5 = redis.Redis(host="127.0.0.1", port=s.port, db=5, socket_timeout=30)
        try:
            r2.set("x2", "gone")
            r2.rpush("l2", "gone")
            assert r2.flushdb()
            r4.set("x4", "four")
            r5.rpush("l5", "five")
            assert r.swapdb(4, 5)
            m.put(4, b"l5", "list", [b"five"])
            m.put(5, b"x4", "string", b"four")
        finally:
            r2.close()
            r4.close()
            r5.close()
        # MULTI/EXEC: one group of records.
        p = r.pipeline(transaction=True)
        p.incr("tx:n").lpush("tx:l", "a", "b").set("tx:s", "v").hset("tx:h", "f", "v")
        p.sadd("tx:set", "m").zadd("tx:z", {"m": 2.5}).delete("s:plain")
        assert p.execute() == [1, 2, True, 1, 1, 1, 1]
        m.drop(0, b"s:plain")
        m.put(0, b"tx:n", "string", b"1")
        m.put(0, b"tx:l", "list", [b"b", b"a"])
        m.put(0, b"tx:s", "string", b"v")
        m.put(0, b"tx:h", "hash", [(b"f", b"v")])
        m.put(0, b"tx:set", "set", [b"m"])
        m.put(0, b"tx:z", "zset", [(b"m", 2.5)])
    finally:
        r.close()

    # memcached text protocol, with flags.
    mc = McClient(("127.0.0.1", s.mc_port), default_noreply=False, timeout=10)
    try:
        assert mc.set("mc:a", b"value", flags=7)
        assert mc.append("mc:a", b"+more")
        m.put(0, b"mc:a", "string", b"value+more")
        t0 = now_ms()
        assert mc.set("mc:ttl", b"t", expire=1000, flags=3)
        m.put(0, b"mc:ttl", "string", b"t", (t0 - 1000 + 1_000_000, now_ms() + 1_000_000))
        assert mc.set("mc:n", b"10", flags=0)
        assert mc.incr("mc:n", 5) == 15
        m.put(0, b"mc:n", "string", b"15")
        assert mc.set("mc:del", b"x") and mc.delete("mc:del")
    finally:
        mc.close()

    # HTTP raw values.
    base = f"http://127.0.0.1:{s.http_port}"
    body = b"\x00http body\xff\r\n"
    assert requests.put(f"{base}/http-put", data=body, timeout=10).status_code == 201
    m.put(0, b"http-put", "string", body)
    assert requests.put(f"{base}/http-del", data=b"x", timeout=10).status_code == 201
    assert requests.delete(f"{base}/http-del", timeout=10).status_code == 204

    # A key whose deadline passes while the server is down.
    with s.raw() as c:
        assert c.cmd("SET", "s:expires-while-down", "x", "PX", 1500) == "OK"
        deadline = c.cmd("PEXPIRETIME", "s:expires-while-down")
    return m, {(0, b"s:expires-while-down"): deadline}


def check_flags(s):
    assert mc_get_with_flags(s.mc_port, b"mc:a") == (7, b"value+more")
    assert mc_get_with_flags(s.mc_port, b"mc:ttl") == (3, b"t")


def live_state(s):
    with s.raw(timeout=60) as c:
        return store_state(c)


def wait_past(deadlines):
    """Waits until the client's clock is past every deadline (ms)."""
    latest = max(deadlines.values())
    wait_for(lambda: now_ms() > latest + 1, timeout=30, what="the deadlines to pass")


# ---------------------------------------------------------------------------
# 1. A reboot: every process killed, the segment gone.


@pytest.mark.parametrize("policy,crash", [("always", "sigkill"), ("everysec", "shutdown"),
                                          ("no", "sigkill")])
def test_reboot_brings_back_every_acknowledged_write(durable, policy, crash):
    s = durable(policy).start()
    model, expiring = write_everything(s)
    before = live_state(s)
    model.keys.update({k: ("string", b"x", (0, 1 << 62)) for k in expiring})
    model.check(before, "the running server before the crash")
    check_flags(s)

    if crash == "shutdown":
        with s.raw() as c:
            c.send(encode("SHUTDOWN"))
            data, closed = c.read_all(timeout=30)
            assert closed, f"SHUTDOWN left the connection open: {data!r}"
        assert s.proc.wait(60) == 0
        s.shutdown()
    else:
        if policy != "always":
            # The ring lives in the segment that the reboot deletes: only
            # what the writer put in the files can come back.
            wait_log_written(s)
        s.kill_all()
    s.remove_segment()
    wait_past(expiring)
    s.start()
    out = s.text()
    assert "no snapshot to load" in out, out
    assert re.search(r"replayed [1-9]\d* log records", out), out

    after = live_state(s)
    for k in expiring:
        model.drop(*k)
        before.pop(k)
    model.check(after, f"after a reboot ({policy}, {crash})")
    assert after == before, state_diff(before, after)
    check_flags(s)
    with s.raw() as c:
        assert c.cmd("EXISTS", "s:gone") == 0
        assert c.cmd("EXISTS", "s:expires-while-down") == 0


def test_restart_twice_keeps_everything(durable):
    """A second reboot replays the files of both runs (a new log file at
    every start; LSNs go on where the first run stopped)."""
    s = durable("always").start()
    with s.raw() as c:
        assert c.cmd("RPUSH", "l", "a", "b") == 2
        assert c.cmd("SET", "k", "1") == "OK"
    s.reboot()
    with s.raw() as c:
        assert c.cmd("RPUSH", "l", "c") == 3
        assert c.cmd("INCR", "k") == 2
        assert c.cmd("SET", "k2", "new") == "OK"
    s.reboot()
    with s.raw() as c:
        assert c.cmd("LRANGE", "l", 0, -1) == [b"a", b"b", b"c"]
        assert c.cmd("GET", "k") == b"2"
        assert c.cmd("GET", "k2") == b"new"
    assert len(list(s.dir.glob("log-*.shlog"))) >= 3


# ---------------------------------------------------------------------------
# 2. A fuzzy snapshot taken while non-idempotent writes run.


BULK = 200_000


def bulk_load(c, model):
    """BULK keys, pipelined: mostly integer strings, and every 1000th few a
    list, hash, set, zset or float string, so the snapshot has every type."""
    cmds = []
    for i in range(BULK):
        key = b"k:%06d" % i
        kind = i % 1000
        if kind == 1:
            items = [b"e%d" % j for j in range(20)]
            cmds.append(("RPUSH", key, *items))
            model.put(0, key, "list", items)
        elif kind == 2:
            pairs = {b"f%d" % j: b"%d" % j for j in range(20)}
            cmds.append(("HSET", key, *[x for kv in pairs.items() for x in kv]))
            model.put(0, key, "hash", dict(pairs))
        elif kind == 3:
            members = {b"m%d" % j for j in range(20)}
            cmds.append(("SADD", key, *sorted(members)))
            model.put(0, key, "set", set(members))
        elif kind == 4:
            scores = {b"m%d" % j: j * 0.5 for j in range(20)}
            cmds.append(("ZADD", key, *[x for ms in scores.items() for x in (repr(ms[1]), ms[0])]))
            model.put(0, key, "zset", dict(scores))
        elif kind == 5:
            cmds.append(("SET", key, "1.5"))
            model.put(0, key, "string", b"1.5")
        else:
            cmds.append(("SET", key, str(i)))
            model.put(0, key, "string", str(i).encode())
    for i in range(0, len(cmds), 5000):
        chunk = cmds[i:i + 5000]
        for reply in fast_pipeline(c, chunk):
            assert not isinstance(reply, Err), reply


class Mutator:
    """Non-idempotent commands on random bulk keys, pipelined in batches,
    the model following each reply (SPOP's tells which member left)."""

    def __init__(self, c, model, seed):
        self.c = c
        self.m = model
        self.rng = random.Random(seed)
        self.sent = 0

    def pick(self, kind):
        return b"k:%06d" % (self.rng.randrange(BULK // 1000) * 1000 + kind)

    def int_key(self):
        while True:
            i = self.rng.randrange(BULK)
            if i % 1000 > 5:
                return b"k:%06d" % i

    def batch(self, n=200):
        ops = []  # (command, on_reply)
        for _ in range(n):
            op = self.rng.randrange(10)
            if op == 0:
                k = self.int_key()
                if self.m.keys.get((0, k), ("string",))[0] != "string":
                    continue
                ops.append((("INCR", k), self.on_incr(k)))
            elif op == 1:
                k = self.pick(5)
                ops.append((("INCRBYFLOAT", k, "0.25"), self.on_string(k)))
            elif op == 2:
                k = self.pick(1)
                v = b"p%d" % self.sent
                ops.append((("LPUSH", k, v), self.on_lpush(k, v)))
            elif op == 3:
                k = self.pick(3)
                ops.append((("SPOP", k), self.on_spop(k)))
            elif op == 4:
                k = self.pick(2)
                ops.append((("HINCRBY", k, "cnt", 3), self.on_hincr(k)))
            elif op == 5:
                k = self.pick(4)
                member = b"m%d" % self.rng.randrange(25)
                ops.append((("ZINCRBY", k, "0.5", member), self.on_zincr(k, member)))
            elif op == 6:
                k = self.int_key()
                ops.append((("DEL", k), self.on_del(k)))
            elif op == 7:
                k = b"new:%d" % self.sent
                v = b"n%d" % self.sent
                ops.append((("SET", k, v), self.on_set(k, v)))
            elif op == 8:
                k = b"app:%d" % self.rng.randrange(100)
                ops.append((("APPEND", k, "+"), self.on_append(k)))
            else:
                a, lst, h = self.int_key(), self.pick(1), self.pick(2)
                if self.m.keys.get((0, a), ("string",))[0] != "string":
                    continue
                ops.append((("MULTI",), None))
                ops.append((("INCR", a), None))
                ops.append((("RPUSH", lst, "tx"), None))
                ops.append((("HINCRBY", h, "tx", 1), None))
                ops.append((("EXEC",), self.on_exec(a, lst, h)))
            self.sent += 1
        replies = fast_pipeline(self.c, [cmd for cmd, _ in ops])
        for (cmd, on_reply), reply in zip(ops, replies):
            assert not isinstance(reply, Err), (cmd, reply)
            if on_reply is not None:
                on_reply(reply)

    def on_incr(self, k):
        def f(reply):
            self.m.put(0, k, "string", str(reply).encode())
        return f

    def on_string(self, k):
        return lambda reply: self.m.put(0, k, "string", reply)

    def on_lpush(self, k, v):
        def f(reply):
            self.m.keys[(0, k)][1].insert(0, v)
            assert reply == len(self.m.keys[(0, k)][1])
        return f

    def on_spop(self, k):
        def f(reply):
            members = self.m.keys.get((0, k), ("set", set()))[1]
            if reply is None:
                assert not members
                return
            members.remove(reply)
            if not members:
                self.m.drop(0, k)
        return f

    def on_hincr(self, k):
        return lambda reply: self.m.keys[(0, k)][1].__setitem__(b"cnt", str(reply).encode())

    def on_zincr(self, k, member):
        return lambda reply: self.m.keys[(0, k)][1].__setitem__(member, float(reply))

    def on_del(self, k):
        def f(reply):
            assert reply == (1 if (0, k) in self.m.keys else 0)
            self.m.drop(0, k)
        return f

    def on_set(self, k, v):
        return lambda reply: self.m.put(0, k, "string", v)

    def on_append(self, k):
        def f(reply):
            old = self.m.keys.get((0, k), ("string", b""))[1]
            self.m.put(0, k, "string", old + b"+")
            assert reply == len(old) + 1
        return f

    def on_exec(self, a, lst, h):
        def f(reply):
            n, length, hv = reply
            self.m.put(0, a, "string", str(n).encode())
            self.m.keys[(0, lst)][1].append(b"tx")
            assert length == len(self.m.keys[(0, lst)][1])
            self.m.keys[(0, h)][1][b"tx"] = str(hv).encode()
        return f


def normalized(model):
    """The bulk model with hashes, sets and zsets in store_state's shapes."""
    out = Model()
    for (db, k), (t, v, e) in model.keys.items():
        if t == "hash":
            v = sorted(v.items())
        elif t == "set":
            v = sorted(v)
        elif t == "zset":
            v = zsorted(v)
        out.put(db, k, t, v if t != "list" else list(v), e)
    return out


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_fuzzy_snapshot_and_replay_give_the_exact_state(durable, policy):
    s = durable(policy, memory="512m").start()
    model = Model()
    c = s.raw(timeout=120)
    watch = s.raw(timeout=120)
    try:
        bulk_load(c, model)
        saves = int(info_section(watch, "persistence")["rdb_saves"])
        mut = Mutator(c, model, seed=7)
        assert c.cmd("BGSAVE") == "Background saving started"
        batches_during = batches = 0

        def snapshot_done():
            p = info_section(watch, "persistence")
            return int(p["rdb_saves"]) > saves and p["rdb_bgsave_in_progress"] == "0"

        while True:
            running = info_section(watch, "persistence")["rdb_bgsave_in_progress"] == "1"
            mut.batch()
            batches += 1
            batches_during += running
            if batches >= 10 and snapshot_done():
                break
            assert batches < 100_000, "the snapshot never finished"
        p = info_section(watch, "persistence")
        assert p["rdb_last_bgsave_status"] == "ok", p
        for _ in range(5):  # more log after the snapshot
            mut.batch()
        print(f"{batches} batches of writes, {batches_during} while the snapshot ran")
        before = store_state(c)
    finally:
        c.close()
        watch.close()
    want = normalized(model)
    want.check(before, "the running server")
    assert list(s.dir.glob("snapshot-*.shsnap")), "no snapshot file"

    if policy != "always":
        wait_log_written(s)
    s.reboot()
    out = s.text()
    assert re.search(r"loaded snapshot \S+ \(\d+ records\)", out), out
    assert re.search(r"replayed [1-9]\d* log records", out), out
    after = live_state(s)
    assert after == before, state_diff(before, after)


# ---------------------------------------------------------------------------
# 3. Every process killed, the segment kept: attach, no replay.


def test_segment_that_survives_is_attached_without_replay(durable):
    s = durable("everysec").start()
    model, _ = write_everything(s)
    before = live_state(s)
    s.kill_all()
    s.start()
    out = s.text()
    assert "attached the segment" in out, out
    assert "replayed" not in out, out
    after = live_state(s)
    before.pop((0, b"s:expires-while-down"), None)
    after.pop((0, b"s:expires-while-down"), None)
    assert after == before, state_diff(before, after)
    check_flags(s)
    # The log goes on from where the attached segment left it: a reboot now
    # replays the writes of both runs.
    with s.raw() as c:
        assert c.cmd("SET", "after-attach", "yes") == "OK"
        assert c.cmd("RPUSH", "l:list", "tail") == 4
    wait_log_written(s)
    s.reboot()
    with s.raw() as c:
        assert c.cmd("GET", "after-attach") == b"yes"
        assert c.cmd("LRANGE", "l:list", 0, -1) == [b"z", b"a", b"b", b"tail"]
        assert c.cmd("GET", "s:bin") == model.keys[(0, b"s:bin")][1]


def test_killed_worker_is_replaced_and_logging_goes_on(durable):
    s = durable("always", workers=2).start()
    with s.raw() as c:
        assert c.cmd("SET", "a", "1") == "OK"
    victim = s.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: victim not in s.worker_pids() and len(s.worker_pids()) == 2,
             what="the supervisor to replace the worker")

    def write_b():
        try:
            with s.raw() as c:
                return c.cmd("SET", "b", "2") == "OK"
        except OSError:
            return False

    wait_for(write_b, what="a write after the worker restart")
    s.reboot()
    with s.raw() as c:
        assert c.pipeline(("GET", "a"), ("GET", "b")) == [b"1", b"2"]


# ---------------------------------------------------------------------------
# 4. appendfsync always: the reply waits for the fsync of its record.


def test_always_replies_only_after_the_fsync(durable, tmp_path):
    gate = tmp_path / "fsync-gate"
    s = durable("always", workers=2, env={"SHOAL_TEST_FSYNC_GATE": str(gate)}).start()
    held = raw_on_worker(s, 0, timeout=10)
    other = raw_on_worker(s, 0, timeout=10)
    try:
        assert held.cmd("SET", "before", "1") == "OK"  # no gate yet
        gate.touch()
        held.send(encode("SET", "k", "v") + encode("PING"))
        held.sock.settimeout(1.0)
        with pytest.raises(socket.timeout):
            data = held.sock.recv(100)
            pytest.fail(f"a reply came while the fsync was held back: {data!r}")
        # A client that wrote nothing is not held, on the same worker.
        assert other.cmd("PING") == "PONG"
        assert other.cmd("ECHO", "x") == b"x"
        p = info_section(other, "persistence")
        assert int(p["shoal_log_fsynced_lsn"]) < int(p["shoal_log_head_lsn"]), p
        gate.unlink()
        held.sock.settimeout(30)
        assert held.reply() == "OK"
        assert held.reply() == "PONG"
        p = info_section(other, "persistence")
        assert int(p["shoal_log_fsynced_lsn"]) >= int(p["shoal_log_written_lsn"]) > 0, p
        assert int(p["shoal_log_written_lsn"]) >= int(p["shoal_log_head_lsn"]), p
    finally:
        held.close()
        other.close()
        if gate.exists():
            gate.unlink()
    s.reboot()
    with s.raw() as c:
        assert c.cmd("GET", "k") == b"v"


def test_always_holds_a_transaction_and_a_memcached_write(durable, tmp_path):
    gate = tmp_path / "fsync-gate"
    s = durable("always", workers=1, env={"SHOAL_TEST_FSYNC_GATE": str(gate)}).start()
    gate.touch()
    try:
        with s.raw() as c:
            # MULTI and a queued command write nothing: answered at once.
            assert c.pipeline(("MULTI",), ("INCR", "n")) == ["OK", "QUEUED"]
            c.send(encode("EXEC"))
            c.sock.settimeout(1.0)
            with pytest.raises(socket.timeout):
                c.reply()
            with socket.create_connection(("127.0.0.1", s.mc_port), timeout=1.0) as m:
                m.sendall(b"set mk 5 0 1\r\nx\r\n")
                with pytest.raises(socket.timeout):
                    m.recv(100)
                gate.unlink()
                m.settimeout(30)
                assert m.recv(100) == b"STORED\r\n"
            c.sock.settimeout(30)
            assert c.reply() == [1]
    finally:
        if gate.exists():
            gate.unlink()


def _mc_binary_set(key, value):
    """A memcached binary-protocol SET request (flags 0, no expiry)."""
    extras = struct.pack(">II", 0, 0)
    body = extras + key + value
    return struct.pack(">BBHBBHIIQ", 0x80, 0x01, len(key), len(extras), 0, 0,
                       len(body), 7, 0) + body


class _Stream:
    """A front end spoken over a plain stream socket: `request` is a write,
    `reply` the start of its answer."""

    def __init__(self, connect, request, reply):
        self.connect, self.request, self.reply = connect, request, reply

    def write(self, s):
        self.sock = self.connect(s)
        self.sock.sendall(self.request)

    def answered(self, timeout):
        self.sock.settimeout(timeout)
        got = b""
        try:
            while len(got) < len(self.reply):
                chunk = self.sock.recv(100)
                if not chunk:
                    break
                got += chunk
        except socket.timeout:
            return None
        return got[:len(self.reply)]

    def close(self):
        self.sock.close()


class _Udp:
    def write(self, s):
        from test_memcached_udp import Udp
        self.udp = Udp(s.mc_port)
        self.udp.send(2, b"set fk 0 0 1\r\nx\r\n")

    def answered(self, timeout):
        got = self.udp.receive(first=timeout)
        return b"".join(d[4] for d in got if d[0] == 2) or None

    def close(self):
        self.udp.close()


class _WebSocket:
    def write(self, s):
        from websockets.sync.client import connect
        self.connection = connect(f"ws://127.0.0.1:{s.http_port}/", subprotocols=["resp"])
        self.ws = self.connection.__enter__()
        self.ws.send(b"*3\r\n$3\r\nSET\r\n$2\r\nfk\r\n$1\r\nx\r\n")

    def answered(self, timeout):
        try:
            return self.ws.recv(timeout=timeout)
        except TimeoutError:
            return None

    def close(self):
        self.connection.__exit__(None, None, None)


def _tcp(port_of):
    return lambda s: socket.create_connection(("127.0.0.1", port_of(s)), timeout=5)


def _unix(s):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(str(s.dir.parent / "shoal.sock"))
    return c


RESP_SET = b"*3\r\n$3\r\nSET\r\n$2\r\nfk\r\n$1\r\nx\r\n"
FRONT_ENDS = {
    "resp": lambda: _Stream(_tcp(lambda s: s.port), RESP_SET, b"+OK\r\n"),
    "unix": lambda: _Stream(_unix, RESP_SET, b"+OK\r\n"),
    "memcached-text": lambda: _Stream(_tcp(lambda s: s.mc_port), b"set fk 0 0 1\r\nx\r\n",
                                      b"STORED\r\n"),
    "memcached-binary": lambda: _Stream(_tcp(lambda s: s.mc_port), _mc_binary_set(b"fk", b"x"),
                                        b"\x81\x01"),
    "memcached-udp": _Udp,
    "http-put": lambda: _Stream(_tcp(lambda s: s.http_port),
                                b"PUT /fk HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx",
                                b"HTTP/1.1 201"),
    "websocket": _WebSocket,
}


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
def test_always_holds_a_write_on_every_front_end(durable, tmp_path, front_end):
    """Under `appendfsync always` a write is answered only after the fsync
    of its record, whatever protocol it came by (every front end goes
    through the one batch runner, which waits)."""
    gate = tmp_path / "fsync-gate"
    s = durable("always", workers=1, env={"SHOAL_TEST_FSYNC_GATE": str(gate)},
                extra_args=["--unixsocket", str(tmp_path / "shoal.sock")]).start()
    gate.touch()
    client = FRONT_ENDS[front_end]()
    try:
        client.write(s)
        assert client.answered(0.5) is None, f"{front_end}: answered before the fsync"
        gate.unlink()
        reply = client.answered(30)
        assert reply is not None and reply.startswith(
            b"+OK" if front_end == "websocket" else b""), reply
    finally:
        client.close()
        if gate.exists():
            gate.unlink()
    s.reboot()
    with s.raw() as c:
        assert c.cmd("GET", "fk") == b"x"


# ---------------------------------------------------------------------------
# 6. SAVE, BGSAVE, LASTSAVE, INFO persistence, CONFIG appendfsync.


def test_info_persistence_fields(durable):
    s = durable("everysec").start()
    with s.raw() as c:
        p = info_section(c, "persistence")
        for field in ("aof_enabled", "rdb_last_save_time", "rdb_bgsave_in_progress",
                      "rdb_changes_since_last_save", "aof_last_write_status",
                      "rdb_last_bgsave_status", "shoal_appendfsync", "shoal_log_head_lsn",
                      "shoal_log_written_lsn", "shoal_log_fsynced_lsn",
                      "shoal_snapshot_start_lsn"):
            assert field in p, (field, p)
        assert p["aof_enabled"] == "1"
        assert p["aof_last_write_status"] == "ok"
        assert p["rdb_bgsave_in_progress"] == "0"
        assert p["shoal_appendfsync"] == "everysec"
        head = int(p["shoal_log_head_lsn"])
        assert c.cmd("SET", "k", "v") == "OK"
        p = info_section(c, "persistence")
        assert int(p["shoal_log_head_lsn"]) > head
        assert int(p["rdb_changes_since_last_save"]) > 0
        # everysec: the fsynced LSN catches up without any further write.
        wait_for(lambda: int(info_section(c, "persistence")["shoal_log_fsynced_lsn"])
                 >= int(p["shoal_log_head_lsn"]), what="everysec to fsync")
        assert "# Persistence" in c.cmd("INFO").decode()


def test_info_persistence_when_off(make_server):
    s = make_server(workers=1)
    with s.raw() as c:
        p = info_section(c, "persistence")
        assert p["aof_enabled"] == "0"
        assert isinstance(c.cmd("SAVE"), Err)
        assert isinstance(c.cmd("BGSAVE"), Err)
        assert isinstance(c.cmd("LASTSAVE"), int)


def test_save_bgsave_lastsave(durable):
    s = durable("everysec").start()
    with s.raw(timeout=60) as c:
        first = c.cmd("LASTSAVE")
        assert isinstance(first, int)
        assert c.cmd("SET", "k", "v") == "OK"
        wait_for(lambda: int(time.time()) > first, what="the next second")
        # A snapshot starts at the LSN the writer has taken from the ring:
        # once it holds every write, nothing is left to count after SAVE.
        wait_log_written(s)
        assert c.cmd("SAVE") == "OK"
        snaps = sorted(s.dir.glob("snapshot-*.shsnap"))
        assert len(snaps) == 1, snaps
        second = c.cmd("LASTSAVE")
        assert second > first
        p = info_section(c, "persistence")
        assert p["rdb_last_bgsave_status"] == "ok"
        assert int(p["rdb_last_save_time"]) == second
        assert int(p["shoal_snapshot_start_lsn"]) > 0
        assert int(p["rdb_changes_since_last_save"]) == 0
        assert c.cmd("SET", "k2", "v") == "OK"
        assert int(info_section(c, "persistence")["rdb_changes_since_last_save"]) > 0
        saves = int(p["rdb_saves"])
        assert c.cmd("BGSAVE") == "Background saving started"
        wait_for(lambda: int(info_section(c, "persistence")["rdb_saves"]) > saves,
                 timeout=60, what="BGSAVE to finish")
        wait_for(lambda: info_section(c, "persistence")["rdb_bgsave_in_progress"] == "0",
                 what="BGSAVE to be over")
        assert c.cmd("BGSAVE", "x") == Err("ERR syntax error")
        assert len(list(s.dir.glob("snapshot-*.shsnap"))) >= 1
        assert not list(s.dir.glob("*.tmp"))
    s.reboot()
    assert "loaded snapshot" in s.text(), s.text()
    with s.raw() as c:
        assert c.pipeline(("GET", "k"), ("GET", "k2")) == [b"v", b"v"]


def test_ctl_snapshot(durable):
    s = durable("everysec").start()
    with s.raw() as c:
        assert c.cmd("SET", "k", "v") == "OK"
    p = subprocess.run([SHOAL_BIN, "ctl", "snapshot", "--port", str(s.port)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert list(s.dir.glob("snapshot-*.shsnap"))
    s.reboot()
    assert "loaded snapshot" in s.text(), s.text()
    with s.raw() as c:
        assert c.cmd("GET", "k") == b"v"


def test_config_appendfsync(durable):
    s = durable("everysec").start()
    with s.raw() as c:
        assert c.cmd("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"everysec"]
        assert c.cmd("CONFIG", "SET", "appendfsync", "always") == "OK"
        assert c.cmd("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"always"]
        assert info_section(c, "persistence")["shoal_appendfsync"] == "always"
        assert c.cmd("SET", "k", "v") == "OK"
        p = info_section(c, "persistence")
        # under always the reply came after the fsync of its record
        assert int(p["shoal_log_fsynced_lsn"]) >= int(p["shoal_log_head_lsn"]), p
        assert c.cmd("CONFIG", "SET", "appendfsync", "no") == "OK"
        assert c.cmd("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"no"]
        assert isinstance(c.cmd("CONFIG", "SET", "appendfsync", "sometimes"), Err)
        assert c.cmd("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"no"]


def test_changes_since_last_save_without_a_log_count_changed_keys(server):
    """Without a log, rdb_changes_since_last_save is Redis's dirty counter:
    one per key changed; a write that changes nothing adds nothing."""
    with server.raw() as c:
        before = int(info_section(c, "persistence")["rdb_changes_since_last_save"])
        assert c.cmd("SETBIT", "dirty-bits", "0", "0") == 0
        assert c.cmd("SET", "dirty-s", "v") == "OK"
        after = int(info_section(c, "persistence")["rdb_changes_since_last_save"])
        assert after == before + 2
        assert c.cmd("SETBIT", "dirty-bits", "0", "0") == 0
        assert int(info_section(c, "persistence")["rdb_changes_since_last_save"]) == after
        assert c.cmd("SETBIT", "dirty-bits", "0", "1") == 0
        assert int(info_section(c, "persistence")["rdb_changes_since_last_save"]) == after + 1
