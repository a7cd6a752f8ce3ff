"""Client-side caching (CLIENT TRACKING, docs/pubsub.md) across workers: the
tracking client, the writer and the redirect target are placed on chosen
worker processes of a two-worker shoal, so every invalidation here crosses
a process boundary. With SHOAL_TEST_TARGET=redis the same tests run against
redis-server (one process: placement is moot), to check the replies."""

import uuid

import pytest

from shoaltest import TARGET, Push, Server, encode, paused, raw_on_worker, worker_slot_pids

INVALIDATE = b"__redis__:invalidate"


@pytest.fixture(scope="module")
def two():
    s = Server(workers=2).start()
    yield s
    s.stop()


@pytest.fixture
def k():
    """A key of this test's own."""
    return f"t{uuid.uuid4().hex[:10]}"


def on(server, slot):
    """A connection on worker `slot` (any connection against Redis)."""
    if TARGET == "redis":
        return server.raw()
    return raw_on_worker(server, slot)


def resp3(conn):
    assert conn.cmd("HELLO", "3")[b"proto"] == 3
    return conn


def test_default_mode_push_crosses_workers(two, k):
    with resp3(on(two, 0)) as c, on(two, 1) as w:
        assert c.cmd("CLIENT", "TRACKING", "on") == "OK"
        w.cmd("SET", k, "1")
        assert c.cmd("GET", k) == b"1"
        w.cmd("SET", k, "2")
        assert c.reply() == Push([b"invalidate", [k.encode()]])
        # Once until read again: the next push is for the key read next.
        w.cmd("SET", k, "3")
        assert c.cmd("GET", k + "x") is None
        w.cmd("SET", k + "x", "1")
        assert c.reply() == Push([b"invalidate", [(k + "x").encode()]])
        assert c.cmd("CLIENT", "TRACKING", "off") == "OK"


def test_resp2_redirect_to_a_subscriber_on_another_worker(two, k):
    with on(two, 0) as c, on(two, 1) as target, on(two, 1) as w:
        target_id = target.cmd("CLIENT", "ID")
        target.cmd("SUBSCRIBE", "__redis__:invalidate")
        assert c.cmd("CLIENT", "TRACKING", "on", "REDIRECT", str(target_id)) == "OK"
        assert c.cmd("CLIENT", "GETREDIR") == target_id
        c.cmd("GET", k)
        w.cmd("SET", k, "1")
        assert target.reply() == [b"message", INVALIDATE, [k.encode()]]
        c.cmd("GET", k)
        w.cmd("FLUSHDB")
        assert target.reply() == [b"message", INVALIDATE, None]
        c.cmd("CLIENT", "TRACKING", "off")


def test_bcast_noloop_from_both_workers(two, k):
    with resp3(on(two, 0)) as c, on(two, 1) as w:
        assert c.cmd("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", k, "NOLOOP") == "OK"
        assert c.cmd("SET", k + ":mine", "1") == "OK"
        w.cmd("MSET", k + ":a", "1", k + ":b", "2", "other", "3")
        push = c.reply()
        assert push[0] == b"invalidate"
        assert sorted(push[1]) == [(k + ":a").encode(), (k + ":b").encode()]
        assert c.cmd("PING") == "PONG"
        c.cmd("CLIENT", "TRACKING", "off")


def test_broken_redirect_is_pushed_when_the_target_left(two, k):
    with resp3(on(two, 0)) as c, on(two, 1) as w:
        target = on(two, 1)
        target_id = target.cmd("CLIENT", "ID")
        c.cmd("CLIENT", "TRACKING", "on", "REDIRECT", str(target_id))
        c.cmd("GET", k)
        assert target.cmd("QUIT") == "OK"
        target.close()
        w.cmd("SET", k, "1")
        assert c.reply() == Push([b"tracking-redir-broken", target_id])
        info = c.cmd("CLIENT", "TRACKINGINFO")
        assert sorted(info[b"flags"]) == [b"broken_redirect", b"on"]
        assert info[b"redirect"] == target_id
        c.cmd("CLIENT", "TRACKING", "off")


def test_redirect_to_an_unknown_id_and_counters(two, k):
    with on(two, 0) as c, on(two, 1) as other:
        assert str(c.cmd("CLIENT", "TRACKING", "on", "REDIRECT", "987654321")) == (
            "ERR The client ID you want redirect to does not exist"
        )
        assert c.cmd("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x") == "OK"
        assert other.cmd("CLIENT", "TRACKING", "on") == "OK"
        other.cmd("MGET", k, k + "2")
        info = c.cmd("INFO").decode()
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        assert int(fields["tracking_clients"]) >= 2
        assert int(fields["tracking_total_keys"]) >= 2
        assert int(fields["tracking_total_prefixes"]) >= 1
        c.cmd("CLIENT", "TRACKING", "off")
        other.cmd("CLIENT", "TRACKING", "off")


def test_a_script_s_read_tracks_the_keys_it_declared(two, k):
    with resp3(on(two, 0)) as c, on(two, 1) as w:
        assert c.cmd("CLIENT", "TRACKING", "on") == "OK"
        a, b, other = k + "a", k + "b", k + "other"
        # A script that reads nothing tracks nothing.
        c.cmd("EVAL", "redis.call('set', KEYS[1], 'x')", "1", other)
        w.cmd("MSET", a, "1", b, "1")
        # A script's read tracks its declared keys, not the key it read.
        assert c.cmd("EVAL", "return redis.call('get', ARGV[1])", "2", a, b, other) == b"x"
        w.cmd("SET", other, "y")
        w.cmd("MSET", a, "2", b, "2")
        assert c.reply() == Push([b"invalidate", [a.encode()]])
        assert c.reply() == Push([b"invalidate", [b.encode()]])
        assert c.cmd("PING") == "PONG"
        assert c.cmd("CLIENT", "TRACKING", "off") == "OK"


@pytest.mark.skipif(TARGET == "redis", reason="stops one of shoal's worker processes")
def test_a_write_replies_after_every_tracking_worker_handled_it(two, k):
    """Redis sends a write's invalidations before its reply. Across workers
    the reply waits until the worker tracking the key has handled the
    write: so invalidations reach a shared redirect target in the writes'
    order, even when one tracking worker is slow (here: stopped) and the
    other is the writer's own."""
    k1, k2 = k + "{1}", k + "{2}"
    with on(two, 0) as target, on(two, 1) as far, on(two, 0) as near, on(two, 0) as w:
        target_id = target.cmd("CLIENT", "ID")
        target.cmd("SUBSCRIBE", "__redis__:invalidate")
        for c, key in ((far, k1), (near, k2)):
            assert c.cmd("CLIENT", "TRACKING", "on", "REDIRECT", str(target_id)) == "OK"
            w.cmd("SET", key, "1")
            assert c.cmd("GET", key) == b"1"
        with paused(worker_slot_pids(two)[1]):
            w.send(encode("INCR", k1))
            # The worker that tracks k1 is stopped: the reply waits for it.
            assert w.silent_for(0.5)
        assert w.reply() == 2
        assert w.cmd("INCR", k2) == 2
        assert target.reply() == [b"message", INVALIDATE, [k1.encode()]]
        assert target.reply() == [b"message", INVALIDATE, [k2.encode()]]
        for c in (far, near):
            assert c.cmd("CLIENT", "TRACKING", "off") == "OK"
