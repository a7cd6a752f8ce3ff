"""One store, two protocols: memcached (pymemcache, raw text) and Redis
(redis-py) on the same shoal server see the same items. An item is a Redis
string in database 0; other Redis types are invisible to memcached reads.
"""

import re
import time

import pytest
from pymemcache.client.base import Client

from memcachetest import Mc, empty


@pytest.fixture
def mc(server, r):
    """pymemcache on the shared server, emptied through Redis (`r`)."""
    c = Client(("127.0.0.1", server.mc_port), default_noreply=False, timeout=10)
    yield c
    c.close()
    empty(server.mc_port)


@pytest.fixture
def raw(server, r):
    c = Mc(server.mc_port)
    yield c
    c.close()


@pytest.fixture
def rb(server, r):
    c = server.client(decode_responses=False)
    yield c
    c.close()


def test_set_in_memcached_get_in_redis_and_back(mc, r):
    assert mc.set("k", b"from memcached")
    assert r.get("k") == "from memcached"
    assert r.type("k") == "string"
    r.set("k", "from redis")
    assert mc.get("k") == b"from redis"
    r.set("only-redis", "x")
    assert mc.get("only-redis") == b"x"


def test_binary_values_cross_unchanged(mc, rb):
    value = bytes(range(256)) + b"\r\nEND\r\n"
    mc.set("bin", value)
    assert rb.get("bin") == value
    rb.set("bin2", value[::-1])
    assert mc.get("bin2") == value[::-1]


def test_flags_survive_redis_reads_and_reset_on_redis_writes(raw, r):
    raw.ask(b"set k 4294967295 0 5\r\nhello\r\n")
    assert r.get("k") == "hello"
    assert r.strlen("k") == 5
    assert raw.ask(b"get k\r\n") == b"VALUE k 4294967295 5\r\nhello\r\nEND\r\n"
    # A Redis write stores a plain string: no client flags.
    r.set("k", "bye")
    assert raw.ask(b"get k\r\n") == b"VALUE k 0 3\r\nbye\r\nEND\r\n"
    # append keeps the item's flags, also across an APPEND from Redis.
    raw.ask(b"set f 42 0 1\r\na\r\n")
    r.append("f", "b")
    assert raw.ask(b"append f 0 0 1\r\nc\r\nget f\r\n") == \
        b"STORED\r\nVALUE f 42 3\r\nabc\r\nEND\r\n"


def test_expiry_both_ways(mc, r, raw):
    mc.set("k", b"v", expire=100)
    assert 95 <= r.ttl("k") <= 100
    r.expire("k", 50)
    assert raw.ask(b"mg k t\r\n") in (b"HD t50\r\n", b"HD t49\r\n")
    mc.touch("k", 0)
    assert r.ttl("k") == -1
    r.set("e", "v", px=200)
    time.sleep(0.4)
    assert mc.get("e") is None
    mc.set("gone", b"v", expire=-1)
    assert r.exists("gone") == 0


def test_incr_across_protocols(mc, r):
    r.set("n", "10")
    assert mc.incr("n", 5) == 15
    assert r.get("n") == "15"
    assert r.incr("n") == 16
    assert mc.decr("n", 20) == 0
    assert r.get("n") == "0"
    mc.set("m", b"41")
    assert r.incrby("m", 1) == 42
    assert mc.get("m") == b"42"


def test_delete_across_protocols(mc, r):
    mc.set("a", b"1")
    assert r.delete("a") == 1
    assert mc.get("a") is None
    r.set("b", "2")
    assert mc.delete("b") is True
    assert r.exists("b") == 0


def test_cas_sees_redis_writes(mc, r):
    mc.set("k", b"1")
    _, token = mc.gets("k")
    r.set("k", "2")
    assert mc.cas("k", b"3", token) is False
    _, token = mc.gets("k")
    assert mc.cas("k", b"3", token) is True
    assert r.get("k") == "3"


def test_other_redis_types_are_invisible_to_reads(mc, r, raw):
    r.rpush("list", "a", "b")
    r.hset("hash", "f", "v")
    r.sadd("set", "m")
    assert mc.get_many(["list", "hash", "set"]) == {}
    assert raw.ask(b"mg list v\r\nme hash\r\n") == b"EN\r\nEN\r\n"
    assert raw.ask(b"incr list 1\r\n") == \
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    assert r.type("list") == "list"
    # A memcached set replaces them, as Redis's SET does.
    assert mc.set("list", b"now a string")
    assert r.type("list") == "string"
    assert r.get("list") == "now a string"


def test_memcached_sees_database_0_only(mc, r, server):
    r1 = server.client(db=1)
    r1.set("k", "db1")
    assert mc.get("k") is None
    mc.set("k", b"db0")
    assert r1.get("k") == "db1"
    assert r.get("k") == "db0"
    # flush_all empties database 0 only.
    assert mc.flush_all()
    assert r.exists("k") == 0
    assert r1.get("k") == "db1"
    r1.close()


def test_values_set_by_redis_keep_their_ttl_through_append(mc, r):
    r.set("k", "a", ex=100)
    assert mc.append("k", b"b")
    assert 95 <= r.ttl("k") <= 100
    assert r.get("k") == "ab"


def test_keyspace_counts_memcached_items(mc, r):
    mc.set_many({"a": b"1", "b": b"2", "c": b"3"})
    assert r.dbsize() == 3
    assert sorted(r.keys("*")) == ["a", "b", "c"]
    stats = mc.stats()
    assert stats[b"curr_items"] == 3


def test_two_workers_share_items_and_cas_values(make_server):
    s = make_server(workers=2)
    rc = s.client()
    clients = [Mc(s.mc_port) for _ in range(8)]
    try:
        for i, c in enumerate(clients):
            assert c.ask(b"set k%d %d 0 1\r\n%d\r\n" % (i, i, i)) == b"STORED\r\n"
        cas = set()
        for c in clients:
            reply = c.ask(b"gets " + b" ".join(b"k%d" % i for i in range(8)) + b"\r\n")
            values = re.findall(rb"VALUE (k\d) (\d+) 1 (\d+)\r\n(\d)\r\n", reply)
            assert [(k, f, v) for k, f, _, v in values] == \
                [(b"k%d" % i, b"%d" % i, b"%d" % i) for i in range(8)]
            cas.add(tuple(t for _, _, t, _ in values))
        assert len(cas) == 1, "every connection sees the same CAS values"
        assert len(set(next(iter(cas)))) == 8, "CAS values are unique"
        assert rc.dbsize() == 8
        # Counters from every connection add up.
        for c in clients:
            c.ask(b"ma n N0 J0 q\r\n")
        # The first creates it at J (0), the other seven add 1.
        assert rc.get("n") == "7"
    finally:
        for c in clients:
            c.close()
        rc.close()
