"""Workers SIGKILLed in the middle of writes while the log is on: the
supervisor restarts them, every client that lost its worker reconnects, and
afterwards the log agrees with the store exactly. A reboot (every process
killed, the segment deleted) rebuilds from the log the very state the
segment held, and every acknowledged write is in it."""

import os
from pathlib import Path
import random
import signal
import threading
import time

import pytest
import redis

from shoaltest import (DurableServer, Raw, encode, info_section, raw_on_worker, wait_for,
                       worker_slot_pids)


def everything(r):
    """Every key of db 0 with its type and value, for comparing stores."""
    out = {}
    for key in r.scan_iter(count=1000):
        t = r.type(key)
        if t == b"string":
            out[key] = (t, r.get(key))
        elif t == b"list":
            out[key] = (t, tuple(r.lrange(key, 0, -1)))
        elif t == b"hash":
            out[key] = (t, tuple(sorted(r.hgetall(key).items())))
        elif t == b"set":
            out[key] = (t, tuple(sorted(r.smembers(key))))
        elif t == b"zset":
            out[key] = (t, tuple(r.zrange(key, 0, -1, withscores=True)))
    return out


def differences(rebuilt, live):
    """The keys on which a store rebuilt from the log and the live one
    differ, each with what one has and the other lacks (list elements,
    hash pairs, members), for an assertion message a failing run can be
    diagnosed from: a lone list element says which push or pop one side
    lacks."""
    out = []
    for key in sorted(set(rebuilt) | set(live)):
        a, b = rebuilt.get(key), live.get(key)
        if a == b:
            continue
        if a is None or b is None or a[0] != b[0] or not isinstance(a[1], tuple):
            out.append(f"{key!r}: rebuilt {str(a)[:200]} live {str(b)[:200]}")
            continue
        in_rebuilt, in_live = set(a[1]), set(b[1])
        only_rebuilt = [x for x in a[1] if x not in in_live][:10]
        only_live = [x for x in b[1] if x not in in_rebuilt][:10]
        out.append(f"{key!r} ({a[0].decode()}, {len(a[1])} rebuilt, {len(b[1])} live): "
                   f"only rebuilt {only_rebuilt}, only live {only_live}, "
                   f"heads {a[1][:3]} / {b[1][:3]}, tails {a[1][-3:]} / {b[1][-3:]}")
    return "\n".join(out)


def log_lsns(port):
    """The log's head and written LSNs (INFO persistence)."""
    with Raw(port) as conn:
        info = info_section(conn, "persistence")
    return int(info["shoal_log_head_lsn"]), int(info["shoal_log_written_lsn"])


def wait_log_written(port):
    """Waits until the log writer has copied every record reserved so far
    from the ring to the log files."""
    head, _ = log_lsns(port)
    wait_for(lambda: log_lsns(port)[1] >= head, timeout=10,
             what="the log writer to catch up")


def writer(port, n, stop, acked, errors):
    """Writes until told to stop, reconnecting whenever its worker dies; a
    write whose reply was lost may or may not have happened."""
    r = redis.Redis(port=port, socket_timeout=10)
    i = 0
    acked[n] = (0, 0)
    while not stop.is_set():
        i += 1
        try:
            pipe = r.pipeline(transaction=i % 5 == 0)
            pipe.incr(f"count:{n}")
            pipe.rpush(f"list:{n}", i)
            pipe.hset(f"hash:{n}", f"f{i % 300}", i)
            pipe.sadd(f"set:{n}", i % 500)
            pipe.zadd(f"zset:{n}", {f"m{i % 200}": i / 7})
            pipe.set(f"str:{n}:{i % 50}", f"v{i}" * (i % 40))
            if i % 7 == 0:
                pipe.lpop(f"list:{n}")
                pipe.srem(f"set:{n}", (i + 3) % 500)
            pipe.execute()
            ok, maybe = acked[n]
            acked[n] = (ok + 1, maybe)
        except (redis.ConnectionError, redis.TimeoutError):
            ok, maybe = acked[n]
            acked[n] = (ok, maybe + 1)
            r = redis.Redis(port=port, socket_timeout=10)
        except redis.ResponseError as e:  # noqa: PERF203
            errors.append(repr(e))


def test_worker_kills_leave_log_and_store_in_agreement(tmp_path):
    srv = DurableServer(tmp_path / "data", appendfsync="everysec", workers=2,
                        extra_args=["--log-file-size", "256k"]).start()
    try:
        stop = threading.Event()
        acked, errors = {}, []
        threads = [threading.Thread(target=writer, args=(srv.port, n, stop, acked, errors))
                   for n in range(4)]
        for t in threads:
            t.start()
        rng = random.Random(7)
        for _ in range(6):
            time.sleep(0.3 + rng.random() * 0.3)
            pids = [p for p in worker_slot_pids(srv).values() if p]
            os.kill(rng.choice(pids), signal.SIGKILL)
            # The supervisor starts a successor; writes go on meanwhile.
            wait_for(lambda: len([p for p in worker_slot_pids(srv).values() if p]) == 2,
                     timeout=20, what="the killed worker's successor")
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors, errors[:5]
        assert all(acked[n][0] > 10 for n in range(4)), acked

        r = redis.Redis(port=srv.port)
        live = everything(r)
        for n in range(4):
            # Every acknowledged INCR is there; one whose reply was lost
            # may be too.
            ok, maybe = acked[n]
            assert ok <= int(live[f"count:{n}".encode()][1]) <= ok + maybe

        # Under everysec a crash loses what the log writer has not copied
        # from the ring yet (docs/persistence.md); the claim here is that
        # recovery rebuilds exactly what the log holds, so the crash comes
        # once the writer has caught up with every acknowledged write.
        wait_log_written(srv.port)
        srv.reboot()
        r = redis.Redis(port=srv.port)
        assert "loaded snapshot" in srv.text() or "replayed" in srv.text(), srv.text()
        rebuilt = everything(r)
        assert rebuilt == live, differences(rebuilt, live)
    finally:
        srv.stop()


def test_worker_kills_during_a_snapshot(tmp_path):
    """The same with a snapshot being written while workers die: snapshot
    plus log rebuild exactly the live store."""
    srv = DurableServer(tmp_path / "data", appendfsync="no", workers=2).start()
    try:
        r = redis.Redis(port=srv.port)
        pipe = r.pipeline(transaction=False)
        for i in range(50_000):
            pipe.set(f"bulk:{i}", "x" * 50)
        pipe.execute()
        stop = threading.Event()
        acked, errors = {}, []
        threads = [threading.Thread(target=writer, args=(srv.port, n, stop, acked, errors))
                   for n in range(3)]
        for t in threads:
            t.start()
        rng = random.Random(11)
        saves = 0
        for _ in range(4):
            r.bgsave()
            saves += 1
            time.sleep(0.1 + rng.random() * 0.2)
            pids = [p for p in worker_slot_pids(srv).values() if p]
            os.kill(rng.choice(pids), signal.SIGKILL)
            wait_for(lambda: len([p for p in worker_slot_pids(srv).values() if p]) == 2,
                     timeout=20, what="the killed worker's successor")
            r = redis.Redis(port=srv.port)
            wait_for(lambda: r.info("persistence")["rdb_bgsave_in_progress"] == 0,
                     timeout=60, what="the snapshot to finish")
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors, errors[:5]
        live = everything(r)
        # As above: the crash comes once the log holds every write.
        wait_log_written(srv.port)
        srv.reboot()
        assert "loaded snapshot" in srv.text(), srv.text()
        rebuilt = everything(redis.Redis(port=srv.port))
        assert rebuilt == live, differences(rebuilt, live)
    finally:
        srv.stop()


def test_a_worker_killed_mid_exec_leaves_store_and_log_as_before_it(tmp_path):
    """A worker SIGKILLed inside an EXEC that already wrote (held before its
    last command by the SHOAL_TEST_EXEC_GATE hook) leaves the store as
    before the EXEC, and the log agrees: a reboot from it has none of the
    EXEC's writes either (its group is dropped, not applied)."""
    gate = tmp_path / "exec-gate"
    srv = DurableServer(tmp_path / "data", appendfsync="always", workers=2,
                        env={"SHOAL_TEST_EXEC_GATE": str(gate)}).start()
    runner = other = None
    try:
        runner = raw_on_worker(srv, 0)
        other = raw_on_worker(srv, 1)
        assert other.cmd("SET", "before", "1") == "OK"
        assert other.cmd("RPUSH", "list", "a", "b") == 2
        assert runner.cmd("MULTI") == "OK"
        for i in range(50):
            assert runner.cmd("SET", f"k{i}", "x" * 200) == "QUEUED"
        assert runner.cmd("DEL", "before") == "QUEUED"
        assert runner.cmd("RPUSH", "list", "c") == "QUEUED"
        assert runner.cmd("SET", "last", "1") == "QUEUED"
        gate.write_text("")
        runner.send(encode("EXEC"))
        reached = Path(str(gate) + ".reached")
        wait_for(reached.exists, timeout=20, what="the EXEC to reach its last command")
        os.kill(worker_slot_pids(srv)[0], signal.SIGKILL)
        gate.unlink()
        runner.close()
        runner = None

        def as_before(r):
            assert r.cmd("GET", "before") == b"1"
            assert r.cmd("LRANGE", "list", "0", "-1") == [b"a", b"b"]
            assert sum(r.cmd("EXISTS", f"k{i}") for i in range(50)) == 0
            assert r.cmd("GET", "last") is None

        as_before(other)
        assert other.cmd("SET", "after", "1") == "OK"
        wait_log_written(srv.port)
        other.close()
        other = None
        srv.reboot()
        with Raw(srv.port) as r:
            as_before(r)
            assert r.cmd("GET", "after") == b"1"
    finally:
        for c in (runner, other):
            if c is not None:
                c.close()
        srv.stop()


@pytest.mark.parametrize("cmds", [
    [("RPUSH", "big", "new")],
    [("LPOP", "big")],
    [("RPUSH", "big", "new"), ("LPOP", "big")],
    [("LPOP", "big"), ("RPUSH", "big", "new")],
    [("RPOP", "big"), ("RPUSH", "big", "new")],
    [("LPUSH", "big", "new"), ("LPOP", "big")],
])
def test_a_worker_killed_mid_exec_undoes_its_in_place_list_writes(tmp_path, cmds):
    """Pushes and pops at a paged list's ends go in place (the leaf's end
    words move); a worker SIGKILLed later in the same EXEC leaves the list
    as before it, a push into room a pop of the EXEC gave back included,
    and the log agrees."""
    gate = tmp_path / "exec-gate"
    srv = DurableServer(tmp_path / "data", appendfsync="always", workers=2,
                        env={"SHOAL_TEST_EXEC_GATE": str(gate)}).start()
    runner = other = None
    try:
        runner = raw_on_worker(srv, 0)
        other = raw_on_worker(srv, 1)
        # Paged, with end leaves written with room at both ends.
        other.cmd("RPUSH", "big", *[f"e{i}" for i in range(300)])
        other.cmd("LPUSH", "big", "h1")
        other.cmd("RPUSH", "big", "t1")
        before = other.cmd("LRANGE", "big", "0", "-1")
        assert runner.cmd("MULTI") == "OK"
        assert runner.cmd("INCR", "count") == "QUEUED"
        for c in cmds:
            assert runner.cmd(*c) == "QUEUED"
        assert runner.cmd("SET", "last", "1") == "QUEUED"
        gate.write_text("")
        runner.send(encode("EXEC"))
        reached = Path(str(gate) + ".reached")
        wait_for(reached.exists, timeout=20, what="the EXEC to reach its last command")
        os.kill(worker_slot_pids(srv)[0], signal.SIGKILL)
        gate.unlink()
        runner.close()
        runner = None
        assert other.cmd("LRANGE", "big", "0", "-1") == before
        assert other.cmd("GET", "count") is None
        # The same writes again, outside an EXEC, then one more push.
        for c in cmds:
            other.cmd(*c)
        other.cmd("RPUSH", "big", "after")
        live = other.cmd("LRANGE", "big", "0", "-1")
        assert len(live) == len(before) + 1 + sum(1 if "PUSH" in c[0] else -1 for c in cmds)
        wait_log_written(srv.port)
        other.close()
        other = None
        srv.reboot()
        with Raw(srv.port) as r:
            assert r.cmd("LRANGE", "big", "0", "-1") == live
            assert r.cmd("GET", "count") is None
    finally:
        for c in (runner, other):
            if c is not None:
                c.close()
        srv.stop()
