"""MIGRATE: keys move to another server (a real redis-server, or another
shoal) as RESTORE commands, with their values, types and expiries, and are
gone here unless COPY; the target's refusals come back as Redis words them."""

import pytest
import redis

pytestmark = pytest.mark.shoal_only


def fill(r):
    r.set("s", "v")
    r.rpush("l", "a", "b")
    r.hset("h", mapping={"f": "1", "g": "2"})
    r.sadd("set", "x", "y")
    r.zadd("z", {"m": 1.5})
    r.xadd("st", {"f": "v"}, id="1-1")
    r.set("ttl", "v", px=100_000)


def assert_moved(target):
    assert target.get("s") == "v"
    assert target.lrange("l", 0, -1) == ["a", "b"]
    assert target.hgetall("h") == {"f": "1", "g": "2"}
    assert target.smembers("set") == {"x", "y"}
    assert target.zrange("z", 0, -1, withscores=True) == [("m", 1.5)]
    assert target.xrange("st") == [("1-1", {"f": "v"})]
    assert 0 < target.pttl("ttl") <= 100_000


@pytest.mark.parametrize("to", ["redis-server", "shoal"])
def test_migrate_moves_every_type_to_another_server(make_server, redis_ref, to):
    source = make_server(workers=2).client(decode_responses=True)
    dest_server = redis_ref if to == "redis-server" else make_server(workers=1)
    target = redis.Redis(port=dest_server.port, db=3, decode_responses=True)
    target.flushdb()
    fill(source)
    keys = ["s", "l", "h", "set", "z", "st", "ttl"]
    assert source.execute_command("MIGRATE", "127.0.0.1", dest_server.port, "", 3, 5000,
                                  "KEYS", *keys, "missing") == "OK"
    assert source.exists(*keys) == 0
    assert_moved(target)
    # Nothing left to move.
    assert source.execute_command("MIGRATE", "127.0.0.1", dest_server.port, "s", 3, 5000) == "NOKEY"
    # Without REPLACE the target refuses an existing key and ours stays.
    source.set("s", "new")
    with pytest.raises(redis.ResponseError,
                       match="^Target instance replied with error: BUSYKEY Target key name already exists.$"):
        source.execute_command("MIGRATE", "127.0.0.1", dest_server.port, "s", 3, 5000)
    assert source.get("s") == "new"
    # COPY REPLACE: overwritten there, kept here.
    assert source.execute_command("MIGRATE", "127.0.0.1", dest_server.port, "s", 3, 5000,
                                  "COPY", "REPLACE") == "OK"
    assert (source.get("s"), target.get("s")) == ("new", "new")
    target.flushdb()


def test_migrate_errors_are_redis_words(make_server, redis_ref):
    """The same replies from shoal and from redis-server."""
    s = make_server(workers=1)
    for server in (s, redis_ref):
        r = server.client(decode_responses=True)
        r.set("k", "v")
        # A refused connection shows when the request is written.
        with pytest.raises(redis.ResponseError, match="^IOERR error or timeout writing to target instance$"):
            r.execute_command("MIGRATE", "127.0.0.1", 1, "k", 0, 200)
        with pytest.raises(redis.ResponseError, match="^IOERR error or timeout connecting to the client$"):
            r.execute_command("MIGRATE", "no-such-host.invalid", 1, "k", 0, 200)
        with pytest.raises(redis.ResponseError, match="^When using MIGRATE KEYS option, the key argument"):
            r.execute_command("MIGRATE", "127.0.0.1", 1, "k", 0, 200, "KEYS", "k")
        with pytest.raises(redis.ResponseError, match="^syntax error$"):
            r.execute_command("MIGRATE", "127.0.0.1", 1, "k", 0, 200, "BOGUS")
        with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
            r.execute_command("MIGRATE", "127.0.0.1", 1, "k", "x", 200)
        with server.raw() as c:
            assert c.cmd("COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5",
                         "AUTH", "KEYS", "KEYS", "a", "b") == [b"a", b"b"]
        r.delete("k")
