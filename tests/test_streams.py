"""Streams and consumer groups across workers and across reboots.

- Four consumers of one group, two on each worker, block in XREADGROUP
  while producers on both workers add entries: every entry is delivered
  exactly once, acknowledged, and XPENDING is empty at the end.
- A consumer that dies holding entries leaves them pending, and another
  consumer claims them.
- XREAD BLOCK on one worker wakes on an XADD from the other; `$` means the
  last ID when the client blocked.
- DUMP of a stream (groups, consumers, pending entries) restores the same
  stream into redis-server 7.0, and redis-server's DUMP into shoal.
- A reboot from the log (every process killed, the segment deleted) brings
  every stream, group, consumer and pending entry back, small and large."""

import threading

import pytest
import redis

from shoaltest import DurableServer, Err, raw_on_worker, wait_for

pytestmark = pytest.mark.shoal_only

ENTRIES = 100_000
CONSUMERS = 4


def consume(server, slot, name, seen, errors, done):
    """A consumer on worker `slot`: reads 100 at a time, blocking, acks
    what it got, until the producers are done and nothing is left."""
    c = raw_on_worker(server, slot)
    try:
        while True:
            reply = c.cmd("XREADGROUP", "GROUP", "g", name, "COUNT", "100",
                          "BLOCK", "200", "STREAMS", "jobs", ">")
            if isinstance(reply, Err):
                errors.append(reply)
                return
            if reply is None:
                if done.is_set():
                    return
                continue
            [[_, items]] = reply
            ids = [item[0] for item in items]
            for item in items:
                seen.append((name, item[1][1]))
            acked = c.cmd("XACK", "jobs", "g", *ids)
            if acked != len(ids):
                errors.append(f"{name} acked {acked} of {len(ids)}")
    finally:
        c.close()


def produce(server, slot, first, count):
    """A producer on worker `slot`: XADDs `count` entries, 100 a pipeline."""
    c = raw_on_worker(server, slot)
    try:
        for start in range(first, first + count, 100):
            c.pipeline(*[("XADD", "jobs", "*", "n", str(i))
                         for i in range(start, min(start + 100, first + count))])
    finally:
        c.close()


def test_one_group_on_two_workers_delivers_each_entry_once(make_server):
    s = make_server(workers=2)
    r = s.client()
    assert r.xgroup_create("jobs", "g", id="$", mkstream=True)
    seen, errors, done = [], [], threading.Event()
    consumers = [threading.Thread(target=consume,
                                  args=(s, i % 2, f"c{i}", seen, errors, done))
                 for i in range(CONSUMERS)]
    for t in consumers:
        t.start()
    half = ENTRIES // 2
    producers = [threading.Thread(target=produce, args=(s, slot, slot * half, half))
                 for slot in (0, 1)]
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    wait_for(lambda: len(seen) >= ENTRIES or errors, timeout=120,
             what="every entry to be consumed")
    done.set()
    for t in consumers:
        t.join()
    assert errors == []
    values = sorted(int(v) for _, v in seen)
    assert values == list(range(ENTRIES)), "an entry was lost or delivered twice"
    assert r.xlen("jobs") == ENTRIES
    summary = r.xpending("jobs", "g")
    assert summary["pending"] == 0
    [group] = r.xinfo_groups("jobs")
    assert group["pending"] == 0 and group["lag"] == 0
    assert group["entries-read"] == ENTRIES
    r.close()


def test_a_dead_consumers_entries_are_claimable(make_server):
    s = make_server(workers=2)
    r = s.client()
    r.xgroup_create("q", "g", id="$", mkstream=True)
    ids = [r.xadd("q", {"n": i}) for i in range(5)]
    dying = s.raw()
    got = dying.cmd("XREADGROUP", "GROUP", "g", "dying", "STREAMS", "q", ">")
    assert [item[0].decode() for item in got[0][1]] == ids
    dying.close()
    pending = r.xpending_range("q", "g", min="-", max="+", count=10)
    assert [p["consumer"] for p in pending] == ["dying"] * 5
    next_id, claimed, deleted = r.xautoclaim("q", "g", "alive", 0, "0-0", count=10)
    assert [c[0] for c in claimed] == ids and deleted == []
    assert {p["consumer"] for p in r.xpending_range("q", "g", "-", "+", 10)} == {"alive"}
    assert r.xack("q", "g", *ids) == 5
    r.close()


def test_xread_block_wakes_on_an_xadd_from_the_other_worker(make_server):
    s = make_server(workers=2)
    r = s.client()
    r.xadd("ticks", {"p": "1"}, id="5-0")
    for waiter_slot, writer_slot in ((0, 1), (1, 0)):
        waiter = raw_on_worker(s, waiter_slot)
        writer = raw_on_worker(s, writer_slot)
        waiter.send(b"*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$1\r\n0\r\n"
                    b"$7\r\nSTREAMS\r\n$5\r\nticks\r\n$1\r\n$\r\n")
        wait_for(lambda: r.info("clients")["blocked_clients"] == 1,
                 what="the reader to block")
        new_id = writer.cmd("XADD", "ticks", "*", "p", "2").decode()
        reply = waiter.reply()
        assert reply == [[b"ticks", [[new_id.encode(), [b"p", b"2"]]]]]
        waiter.close()
        writer.close()
    r.close()


def snapshot(r):
    """Everything the streams hold, times included (they are stored)."""
    out = {}
    for key in sorted(r.scan_iter(_type="stream")):
        out[key] = (r.xrange(key), r.xinfo_stream(key, full=True))
    return out


def test_a_reboot_brings_streams_groups_and_pels_back(tmp_path):
    s = DurableServer(tmp_path, appendfsync="always").start()
    try:
        r = redis.Redis(port=s.port)
        for i in range(3000):
            r.xadd("big", {"i": i, "pad": "x" * (i % 50)}, id=f"{i + 1}-1")
        r.xadd("small", {"a": 1}, id="1-1")
        r.xadd("small", {"a": 2}, id="2-1")
        r.xdel("big", "10-1", "2000-1")
        r.xtrim("big", maxlen=2900)
        for key in ("big", "small"):
            r.xgroup_create(key, "g1", id="0")
            r.xgroup_create(key, "g2", id="$")
            r.xreadgroup("g1", "alice", {key: ">"}, count=40)
            r.xreadgroup("g1", "bob", {key: ">"}, count=3)
            r.xgroup_createconsumer(key, "g2", "carol")
        r.xack("big", "g1", "150-1", "151-1")
        r.xclaim("big", "g1", "bob", 0, ["152-1", "153-1"])
        r.execute_command("XSETID", "small", "50-0", "ENTRIESADDED", 10, "MAXDELETEDID", "3-0")
        r.xadd("gone", {"a": 1})
        r.xgroup_create("gone", "g", id="0")
        r.xgroup_destroy("gone", "g")
        before = snapshot(r)
        assert set(before) == {b"big", b"small", b"gone"}
        r.close()
        s.kill_all()
        s.remove_segment()
        s.start()
        r = redis.Redis(port=s.port)
        assert snapshot(r) == before
        r.close()
    finally:
        s.stop()


def stream_state(c, key):
    info = c.xinfo_stream(key, full=True)
    groups = [(g["name"], g["last-delivered-id"], g["entries-read"], g["pel-count"],
               g["pending"], [(k["name"], k["seen-time"], k["pel-count"], k["pending"])
                              for k in g["consumers"]]) for g in info["groups"]]
    return (c.xrange(key), info["entries-added"], info["last-generated-id"],
            info["max-deleted-entry-id"], groups)


def test_dump_and_restore_streams_both_ways_with_redis(r, redis_ref):
    ref = redis_ref.client()
    ref.delete("s")
    for i in range(250):
        fields = {"f": i, "g": "x" * (i % 5)} if i % 7 else {"other": i}
        ref.xadd("s", fields, id=f"{i + 1}-{i % 3}")
    ref.xdel("s", "5-1")
    ref.xgroup_create("s", "g1", id="0")
    ref.xreadgroup("g1", "alice", {"s": ">"}, count=20)
    ref.xreadgroup("g1", "bob", {"s": ">"}, count=5)
    ref.xgroup_create("s", "g2", id="$")
    r.restore("s", 0, ref.dump("s"))
    assert stream_state(r, "s") == stream_state(ref, "s")
    payload = r.dump("s")
    ref.delete("s")
    ref.restore("s", 0, payload)
    assert stream_state(ref, "s") == stream_state(r, "s")
    ref.delete("s")
    ref.close()


def test_a_group_set_past_the_entries_added_shows_redis_negative_lag(r, redis_ref):
    # XGROUP SETID's ENTRIESREAD may claim more reads than entries were
    # ever added; XINFO's lag is then the (negative) difference, as Redis
    # computes it, not 0.
    ref = redis_ref.client()
    ref.delete("s")
    for client in (r, ref):
        last = client.xadd("s", {"f": "v"}, id="1-1")
        client.xgroup_create("s", "g", id="0")
        client.xgroup_setid("s", "g", last, entries_read=3)
    assert r.xinfo_groups("s")[0]["lag"] == -2
    assert r.xinfo_groups("s") == ref.xinfo_groups("s")


def encode(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


@pytest.mark.parametrize("change", [
    [("DEL", "mystream")],
    [("SET", "mystream", "x")],
    [("MULTI",), ("DEL", "mystream"), ("SADD", "mystream", "e1"), ("EXEC",)],
    [("FLUSHALL",)],
])
def test_a_blocked_xreadgroup_is_woken_when_its_stream_goes_on_another_worker(make_server, change):
    """Redis's unit/type/stream-cgroups checks this without waiting for the
    reader to block (a cross-worker race on shoal, see known-differences):
    here the change comes once the reader is blocked, on the other worker,
    and the reader gets Redis's UNBLOCKED error."""
    s = make_server(workers=2)
    r = s.client()
    for reader_slot, writer_slot in ((0, 1), (1, 0)):
        r.delete("mystream")
        r.xadd("mystream", {"f": "v"}, id="666-0")
        r.xgroup_create("mystream", "mygroup", id="$")
        reader = raw_on_worker(s, reader_slot)
        writer = raw_on_worker(s, writer_slot)
        reader.send(encode("XREADGROUP", "GROUP", "mygroup", "Alice", "BLOCK", "0",
                           "STREAMS", "mystream", ">"))
        wait_for(lambda: r.info("clients")["blocked_clients"] == 1,
                 what="the reader to block")
        for cmd in change:
            writer.cmd(*cmd)
        assert reader.reply() == Err("UNBLOCKED the stream key no longer exists")
        reader.close()
        writer.close()
    r.close()
