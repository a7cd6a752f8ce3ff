"""Key-space commands end to end (DEL UNLINK EXISTS TYPE KEYS SCAN RENAME
RENAMENX RANDOMKEY, the EXPIRE family with NX XX GT LT, EXPIRETIME PEXPIRETIME
TTL PTTL PERSIST TOUCH COPY MOVE SWAPDB DBSIZE FLUSHDB FLUSHALL OBJECT), with
Redis 7.0's replies and error strings."""

import time

import pytest

from shoaltest import Err

NOT_INT = Err("ERR value is not an integer or out of range")
SYNTAX = Err("ERR syntax error")


def arity(cmd):
    return Err(f"ERR wrong number of arguments for '{cmd}' command")


def test_del_unlink_exists(raw):
    for k in "abc":
        raw.cmd("SET", k, "1")
    assert raw.cmd("EXISTS", "a", "a", "nokey", "b") == 3  # repeats count
    assert raw.cmd("DEL", "a", "nokey") == 1
    assert raw.cmd("DEL", "a") == 0
    assert raw.cmd("UNLINK", "b", "c", "b") == 2
    assert raw.cmd("EXISTS", "a", "b", "c") == 0
    assert raw.cmd("DEL") == arity("del")
    assert raw.cmd("UNLINK") == arity("unlink")
    assert raw.cmd("EXISTS") == arity("exists")


def test_del_redis_py(r):
    r.set("x", "1")
    assert r.delete("x", "y") == 1
    assert r.exists("x") == 0


def test_type(raw):
    raw.cmd("SET", "s", "v")
    assert raw.cmd("TYPE", "s") == "string"
    assert raw.cmd("TYPE", "nokey") == "none"
    assert raw.cmd("TYPE") == arity("type")


def test_keys(r):
    r.mset({"one": 1, "two": 2, "three": 3, "four": 4, "a[b": 5, "h?llo": 6})
    assert sorted(r.keys("*")) == sorted(["one", "two", "three", "four", "a[b", "h?llo"])
    assert sorted(r.keys("t*")) == ["three", "two"]
    assert sorted(r.keys("*o*")) == ["four", "h?llo", "one", "two"]
    assert r.keys("?ne") == ["one"]
    assert sorted(r.keys("[ot]*")) == ["one", "three", "two"]
    assert sorted(r.keys("[^o]*")) == sorted(["two", "three", "four", "a[b", "h?llo"])
    assert r.keys("a\\[b") == ["a[b"]
    assert r.keys("h\\?llo") == ["h?llo"]
    assert r.keys("nomatch*") == []


def test_keys_skips_expired_and_other_dbs(raw):
    raw.cmd("SET", "live", "1")
    raw.cmd("SET", "dead", "1", "PX", "1")
    time.sleep(0.05)
    raw.cmd("SELECT", "2")
    raw.cmd("SET", "elsewhere", "1")
    raw.cmd("SELECT", "0")
    assert raw.cmd("KEYS", "*") == [b"live"]


def test_scan_full_iteration_returns_each_key_once(r):
    keys = {f"key:{i}" for i in range(1000)}
    r.mset({k: "v" for k in keys})
    seen = []
    cursor = 0
    calls = 0
    while True:
        cursor, batch = r.scan(cursor=cursor, count=37)
        seen.extend(batch)
        calls += 1
        assert calls < 10000
        if cursor == 0:
            break
    assert len(seen) == len(keys)
    assert set(seen) == keys


def test_scan_match_count_type(r):
    r.mset({f"user:{i}": i for i in range(100)})
    r.mset({f"item:{i}": i for i in range(100)})
    got = set(r.scan_iter(match="user:*", count=10))
    assert got == {f"user:{i}" for i in range(100)}
    got = set(r.scan_iter(match="item:1?", count=1000))
    assert got == {f"item:{i}" for i in range(10, 20)}
    assert set(r.scan_iter(_type="string", count=50)) == got | {f"item:{i}" for i in range(100)} | {
        f"user:{i}" for i in range(100)}
    assert list(r.scan_iter(_type="list")) == []
    assert list(r.scan_iter(_type="nosuchtype")) == []


def test_scan_reply_shape_and_errors(raw):
    raw.cmd("SET", "k", "v")
    cursor, keys = raw.cmd("SCAN", "0", "COUNT", "1000")
    assert cursor == b"0" and keys == [b"k"]
    assert raw.cmd("SCAN", "0", "MATCH", "nomatch") == [b"0", []]
    assert raw.cmd("SCAN", "x") == Err("ERR invalid cursor")
    assert raw.cmd("SCAN", "0", "COUNT", "x") == NOT_INT
    assert raw.cmd("SCAN", "0", "COUNT", "0") == SYNTAX
    assert raw.cmd("SCAN", "0", "FOO") == SYNTAX
    assert raw.cmd("SCAN", "0", "MATCH") == SYNTAX


def test_rename(raw):
    raw.cmd("SET", "a", "1", "EX", "100")
    assert raw.cmd("RENAME", "a", "b") == "OK"
    assert raw.cmd("EXISTS", "a") == 0
    assert raw.cmd("GET", "b") == b"1"
    assert 0 < raw.cmd("TTL", "b") <= 100  # the TTL moves with the value
    raw.cmd("SET", "c", "3")
    assert raw.cmd("RENAME", "b", "c") == "OK"  # overwrites
    assert raw.cmd("GET", "c") == b"1"
    assert raw.cmd("RENAME", "c", "c") == "OK"
    assert raw.cmd("RENAME", "nokey", "x") == Err("ERR no such key")
    assert raw.cmd("RENAME", "c") == arity("rename")


def test_renamenx(raw):
    raw.cmd("MSET", "a", "1", "b", "2")
    assert raw.cmd("RENAMENX", "a", "b") == 0
    assert raw.cmd("RENAMENX", "a", "a") == 0
    assert raw.cmd("RENAMENX", "a", "c") == 1
    assert raw.cmd("MGET", "a", "b", "c") == [None, b"2", b"1"]
    assert raw.cmd("RENAMENX", "nokey", "x") == Err("ERR no such key")


def test_randomkey(raw):
    assert raw.cmd("RANDOMKEY") is None
    raw.cmd("MSET", "a", "1", "b", "2", "c", "3")
    for _ in range(20):
        assert raw.cmd("RANDOMKEY") in (b"a", b"b", b"c")


# -- expiry -----------------------------------------------------------------

def test_expire_ttl_persist(raw):
    assert raw.cmd("EXPIRE", "nokey", "10") == 0
    assert raw.cmd("TTL", "nokey") == -2
    assert raw.cmd("PTTL", "nokey") == -2
    raw.cmd("SET", "k", "v")
    assert raw.cmd("TTL", "k") == -1
    assert raw.cmd("PTTL", "k") == -1
    assert raw.cmd("EXPIRE", "k", "100") == 1
    assert raw.cmd("TTL", "k") == 100
    assert 99000 < raw.cmd("PTTL", "k") <= 100000
    assert raw.cmd("PEXPIRE", "k", "50000") == 1
    assert 49000 < raw.cmd("PTTL", "k") <= 50000
    assert raw.cmd("PERSIST", "k") == 1
    assert raw.cmd("PERSIST", "k") == 0
    assert raw.cmd("PERSIST", "nokey") == 0
    assert raw.cmd("TTL", "k") == -1


def test_expire_in_the_past_deletes(raw):
    raw.cmd("SET", "k", "v")
    assert raw.cmd("EXPIRE", "k", "-1") == 1
    assert raw.cmd("EXISTS", "k") == 0
    raw.cmd("SET", "k", "v")
    assert raw.cmd("PEXPIREAT", "k", "1") == 1
    assert raw.cmd("GET", "k") is None


def test_expireat_pexpireat_expiretime(raw):
    raw.cmd("SET", "k", "v")
    at = int(time.time()) + 1000
    assert raw.cmd("EXPIREAT", "k", str(at)) == 1
    assert raw.cmd("EXPIRETIME", "k") == at
    assert raw.cmd("PEXPIRETIME", "k") == at * 1000
    assert raw.cmd("PEXPIREAT", "k", str(at * 1000 + 250)) == 1
    assert raw.cmd("PEXPIRETIME", "k") == at * 1000 + 250
    assert raw.cmd("EXPIRETIME", "k") == at  # rounded down
    raw.cmd("SET", "p", "v")
    assert raw.cmd("EXPIRETIME", "p") == -1
    assert raw.cmd("PEXPIRETIME", "p") == -1
    assert raw.cmd("EXPIRETIME", "nokey") == -2
    assert raw.cmd("PEXPIRETIME", "nokey") == -2


def test_expire_nx_xx_gt_lt(raw):
    raw.cmd("SET", "k", "v")
    assert raw.cmd("EXPIRE", "k", "100", "XX") == 0  # no TTL yet
    assert raw.cmd("EXPIRE", "k", "100", "GT") == 0  # no TTL counts as infinite
    assert raw.cmd("EXPIRE", "k", "200", "NX") == 1
    assert raw.cmd("EXPIRE", "k", "100", "NX") == 0
    assert raw.cmd("EXPIRE", "k", "200", "XX") == 1
    assert raw.cmd("EXPIRE", "k", "300", "GT") == 1
    assert raw.cmd("EXPIRE", "k", "100", "GT") == 0
    assert raw.cmd("EXPIRE", "k", "100", "LT") == 1
    assert raw.cmd("EXPIRE", "k", "200", "LT") == 0
    assert raw.cmd("TTL", "k") == 100
    assert raw.cmd("EXPIRE", "k", "150", "xx", "gt") == 1  # XX GT together is fine
    raw.cmd("PERSIST", "k")
    assert raw.cmd("PEXPIRE", "k", "100000", "LT") == 1  # below infinite
    at = int(time.time()) + 5000
    assert raw.cmd("EXPIREAT", "k", str(at), "GT") == 1
    assert raw.cmd("PEXPIREAT", "k", str(at * 1000 - 1), "GT") == 0
    assert raw.cmd("EXPIRETIME", "k") == at


def test_expire_errors(raw):
    raw.cmd("SET", "k", "v")
    assert raw.cmd("EXPIRE", "k", "100", "FOO") == Err("ERR Unsupported option FOO")
    assert raw.cmd("EXPIRE", "k", "100", "NX", "XX") == Err(
        "ERR NX and XX, GT or LT options at the same time are not compatible")
    assert raw.cmd("EXPIRE", "k", "100", "NX", "GT") == Err(
        "ERR NX and XX, GT or LT options at the same time are not compatible")
    assert raw.cmd("EXPIRE", "k", "100", "GT", "LT") == Err(
        "ERR GT and LT options at the same time are not compatible")
    assert raw.cmd("EXPIRE", "k", "x") == NOT_INT
    assert raw.cmd("EXPIRE", "k", "9223372036854775807") == Err(
        "ERR invalid expire time in 'expire' command")
    assert raw.cmd("EXPIRE", "k", "-9223372036854775808") == Err(
        "ERR invalid expire time in 'expire' command")
    assert raw.cmd("PEXPIRE", "k", "9223372036854775807") == Err(
        "ERR invalid expire time in 'pexpire' command")
    assert raw.cmd("EXPIREAT", "k", "9223372036854775807") == Err(
        "ERR invalid expire time in 'expireat' command")
    assert raw.cmd("TTL", "k") == -1
    assert raw.cmd("EXPIRE", "k") == arity("expire")


def test_expired_key_disappears(raw):
    raw.cmd("SET", "k", "v")
    raw.cmd("PEXPIRE", "k", "30")
    deadline = time.monotonic() + 5
    while raw.cmd("EXISTS", "k"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert raw.cmd("TTL", "k") == -2


def test_active_expiry_removes_untouched_keys(raw):
    raw.cmd("MSET", "keep", "1")
    for i in range(50):
        raw.cmd("SET", f"tmp:{i}", "v", "PX", "20")
    deadline = time.monotonic() + 10
    while raw.cmd("DBSIZE") != 1:
        assert time.monotonic() < deadline, "the expiry sweeper never removed the keys"
        time.sleep(0.05)


def test_touch(raw):
    raw.cmd("MSET", "a", "1", "b", "2")
    assert raw.cmd("TOUCH", "a", "b", "nokey") == 2
    assert raw.cmd("TOUCH") == arity("touch")


# -- COPY MOVE SWAPDB -----------------------------------------------------------

def test_copy(raw):
    raw.cmd("SET", "src", "v", "EX", "100")
    assert raw.cmd("COPY", "src", "dst") == 1
    assert raw.cmd("GET", "dst") == b"v"
    assert 0 < raw.cmd("TTL", "dst") <= 100
    raw.cmd("SET", "src", "w")
    assert raw.cmd("COPY", "src", "dst") == 0
    assert raw.cmd("GET", "dst") == b"v"
    assert raw.cmd("COPY", "src", "dst", "REPLACE") == 1
    assert raw.cmd("GET", "dst") == b"w"
    assert raw.cmd("COPY", "nokey", "dst") == 0
    assert raw.cmd("COPY", "src", "dst", "DB", "1") == 1
    raw.cmd("SELECT", "1")
    assert raw.cmd("GET", "dst") == b"w"
    assert raw.cmd("COPY", "dst", "dst") == Err("ERR source and destination objects are the same")
    assert raw.cmd("COPY", "dst", "x", "DB", "16") == Err("ERR DB index is out of range")
    assert raw.cmd("COPY", "dst", "x", "DB", "x") == NOT_INT
    assert raw.cmd("COPY", "dst", "x", "FOO") == SYNTAX


def test_move(raw):
    raw.cmd("SET", "k", "v")
    assert raw.cmd("MOVE", "k", "1") == 1
    assert raw.cmd("EXISTS", "k") == 0
    assert raw.cmd("MOVE", "nokey", "1") == 0
    raw.cmd("SET", "k", "other")
    assert raw.cmd("MOVE", "k", "1") == 0  # already there
    assert raw.cmd("GET", "k") == b"other"
    raw.cmd("SELECT", "1")
    assert raw.cmd("GET", "k") == b"v"
    assert raw.cmd("MOVE", "k", "1") == Err("ERR source and destination objects are the same")
    assert raw.cmd("MOVE", "k", "16") == Err("ERR DB index is out of range")
    assert raw.cmd("MOVE", "k", "x") == NOT_INT


def test_swapdb(server, raw):
    raw.cmd("SET", "k", "zero")
    raw.cmd("SELECT", "1")
    raw.cmd("MSET", "k", "one", "k1", "x")
    assert raw.cmd("SWAPDB", "0", "1") == "OK"
    assert raw.cmd("GET", "k") == b"zero"  # this client stays on db 1, which now holds db 0's data
    assert raw.cmd("DBSIZE") == 1
    with server.raw() as other:  # so does every other client
        assert other.cmd("GET", "k") == b"one"
        assert other.cmd("DBSIZE") == 2
    assert raw.cmd("SWAPDB", "0", "0") == "OK"
    assert raw.cmd("SWAPDB", "0", "16") == Err("ERR DB index is out of range")
    assert raw.cmd("SWAPDB", "x", "0") == Err("ERR invalid first DB index")
    assert raw.cmd("SWAPDB", "0", "x") == Err("ERR invalid second DB index")


# -- DBSIZE FLUSHDB FLUSHALL ------------------------------------------------------

def test_dbsize_flushdb_flushall(raw):
    assert raw.cmd("DBSIZE") == 0
    raw.cmd("MSET", "a", "1", "b", "2")
    assert raw.cmd("DBSIZE") == 2
    raw.cmd("SELECT", "1")
    raw.cmd("SET", "c", "3")
    assert raw.cmd("DBSIZE") == 1
    assert raw.cmd("FLUSHDB") == "OK"
    assert raw.cmd("DBSIZE") == 0
    raw.cmd("SET", "c", "3")
    raw.cmd("SELECT", "0")
    assert raw.cmd("DBSIZE") == 2
    assert raw.cmd("FLUSHDB", "ASYNC") == "OK"
    assert raw.cmd("DBSIZE") == 0
    raw.cmd("SET", "a", "1")
    assert raw.cmd("FLUSHALL", "SYNC") == "OK"
    assert raw.cmd("DBSIZE") == 0
    raw.cmd("SELECT", "1")
    assert raw.cmd("DBSIZE") == 0
    assert raw.cmd("FLUSHDB", "FOO") == SYNTAX
    assert raw.cmd("FLUSHALL", "FOO") == SYNTAX


# -- OBJECT -----------------------------------------------------------------

def test_object_encoding(raw):
    raw.cmd("SET", "i", "123")
    raw.cmd("SET", "s", "abc")
    raw.cmd("SET", "long", "a" * 50)
    raw.cmd("SET", "big", "12345678901234567890")
    assert raw.cmd("OBJECT", "ENCODING", "i") == b"int"
    assert raw.cmd("OBJECT", "ENCODING", "s") == b"embstr"
    assert raw.cmd("OBJECT", "ENCODING", "long") == b"raw"
    assert raw.cmd("OBJECT", "ENCODING", "big") == b"embstr"
    assert raw.cmd("OBJECT", "ENCODING", "nokey") is None
    assert raw.cmd("OBJECT", "ENCODING") == arity("object|encoding")


def test_object_idletime(raw):
    raw.cmd("SET", "s", "abc")
    idle = raw.cmd("OBJECT", "IDLETIME", "s")
    assert isinstance(idle, int) and 0 <= idle <= 2
    assert raw.cmd("OBJECT", "IDLETIME", "nokey") is None


def test_object_freq(raw):
    raw.cmd("SET", "s", "abc")
    assert raw.cmd("OBJECT", "FREQ", "s") == Err(
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
        "that when switching between policies at runtime LRU and LFU data will take some time "
        "to adjust.")
    assert raw.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == "OK"
    try:
        raw.cmd("GET", "s")
        freq = raw.cmd("OBJECT", "FREQ", "s")
        assert isinstance(freq, int) and freq >= 0
        assert raw.cmd("OBJECT", "FREQ", "nokey") is None
    finally:
        raw.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction")


def test_object_refcount_of_small_integers_follows_the_eviction_policy(raw):
    """Redis shares the integers 0..9999 unless maxmemory is set with an
    LRU or LFU policy (each value then needs its own access clock)."""
    raw.cmd("SET", "a", "1")
    raw.cmd("SET", "big", "10000")
    assert raw.cmd("OBJECT", "REFCOUNT", "a") == 2147483647
    assert raw.cmd("OBJECT", "REFCOUNT", "big") == 1
    try:
        assert raw.cmd("CONFIG", "SET", "maxmemory", "1073741824") == "OK"
        assert raw.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-random") == "OK"
        raw.cmd("SET", "a", "1")
        assert raw.cmd("OBJECT", "REFCOUNT", "a") == 2147483647
        for policy in ("allkeys-lru", "volatile-lru", "allkeys-lfu", "volatile-lfu"):
            assert raw.cmd("CONFIG", "SET", "maxmemory-policy", policy) == "OK"
            raw.cmd("SET", "a", "1")
            assert raw.cmd("OBJECT", "REFCOUNT", "a") == 1
    finally:
        raw.cmd("CONFIG", "SET", "maxmemory", "0")
        raw.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction")


def test_object_unknown_subcommand(raw):
    assert raw.cmd("OBJECT", "FOO", "s") == Err("ERR unknown subcommand 'FOO'. Try OBJECT HELP.")


@pytest.mark.parametrize("db", [0, 7, 15])
def test_databases_are_separate(raw, db):
    raw.cmd("SELECT", str(db))
    raw.cmd("SET", "k", f"db{db}")
    for other in (0, 7, 15):
        raw.cmd("SELECT", str(other))
        assert raw.cmd("GET", "k") == (f"db{db}".encode() if other == db else None)
