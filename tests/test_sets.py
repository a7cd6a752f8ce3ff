"""Set commands end to end (SADD SREM SCARD SISMEMBER SMISMEMBER SMEMBERS SPOP
SRANDMEMBER SMOVE SINTER SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF
SDIFFSTORE SSCAN), each reply and error string as redis-server 7.0 sends it.
Sets have no order, so members are compared as sets (and checked for
repeats)."""

from collections import Counter

import pytest

from shoaltest import Err, Map, RSet, encode

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = Err("ERR value is not an integer or out of range")
SYNTAX = Err("ERR syntax error")
MUST_BE_POSITIVE = Err("ERR value is out of range, must be positive")


def arity(cmd):
    return Err(f"ERR wrong number of arguments for '{cmd}' command")


def raw_reply(c, *args):
    c.send(encode(*args))
    return c.reply_bytes()


def members(raw, key):
    got = raw.cmd("SMEMBERS", key)
    assert isinstance(got, list)
    s = set(got)
    assert len(s) == len(got), f"SMEMBERS repeats a member: {got!r}"
    return s


def bset(*xs):
    return {x.encode() if isinstance(x, str) else x for x in xs}


# -- SADD SREM SCARD SISMEMBER SMISMEMBER SMEMBERS -----------------------------

def test_sadd_srem_scard(raw):
    assert raw.cmd("SCARD", "s") == 0
    assert raw.cmd("SADD", "s", "a") == 1
    assert raw.cmd("SADD", "s", "a", "b", "b", "c") == 2  # new members only
    assert raw.cmd("SCARD", "s") == 3
    assert raw.cmd("TYPE", "s") == "set"
    assert members(raw, "s") == bset("a", "b", "c")
    assert raw.cmd("SREM", "s", "a", "a", "nomember") == 1
    assert raw.cmd("SREM", "s", "a") == 0
    assert raw.cmd("SREM", "nokey", "a") == 0
    assert raw.cmd("SREM", "s", "b", "c") == 2
    assert raw.cmd("EXISTS", "s") == 0  # the last member gone: the key is gone
    assert raw.cmd("SADD", "s") == arity("sadd")
    assert raw.cmd("SREM", "s") == arity("srem")
    assert raw.cmd("SCARD") == arity("scard")


def test_sadd_binary_integers_and_mixed(rb):
    assert rb.sadd("s", b"", b"\x00\xff", b"1", b"01", b"1.0", b"-0", b"0") == 7
    assert rb.smembers("s") == {b"", b"\x00\xff", b"1", b"01", b"1.0", b"-0", b"0"}
    assert rb.sismember("s", b"01") == 1
    assert rb.sismember("s", b"001") == 0
    # integers keep their exact text
    assert rb.sadd("i", b"10", b"-5", b"9223372036854775807", b"-9223372036854775808") == 4
    assert rb.smembers("i") == {b"10", b"-5", b"9223372036854775807", b"-9223372036854775808"}
    assert rb.sadd("i", b"10") == 0
    assert rb.sadd("i", b"+10") == 1  # not the same member as 10


def test_sismember_smismember(raw):
    raw.cmd("SADD", "s", "a", "b")
    assert raw.cmd("SISMEMBER", "s", "a") == 1
    assert raw.cmd("SISMEMBER", "s", "z") == 0
    assert raw.cmd("SISMEMBER", "nokey", "a") == 0
    assert raw.cmd("SMISMEMBER", "s", "a", "z", "b", "a") == [1, 0, 1, 1]
    assert raw.cmd("SMISMEMBER", "nokey", "a", "b") == [0, 0]
    assert raw.cmd("SISMEMBER", "s") == arity("sismember")
    assert raw.cmd("SMISMEMBER", "s") == arity("smismember")


def test_smembers_missing(raw):
    assert raw_reply(raw, "SMEMBERS", "nokey") == b"*0\r\n"


@pytest.mark.parametrize("n", [10, 1000])
def test_large_sets(r, n):
    strs = {f"m{i}" for i in range(n)}
    ints = {str(i * 7 - 300) for i in range(n)}
    assert r.sadd("s", *strs) == n
    assert r.sadd("i", *ints) == n
    assert r.scard("s") == n and r.scard("i") == n
    assert r.smembers("s") == strs
    assert r.smembers("i") == ints
    assert r.smismember("i", ["-300", "-299", "401"]) == [1, 0, 0]


def test_set_redis_py(r):
    assert r.sadd("s", "a", "b", 3) == 3
    assert r.smembers("s") == {"a", "b", "3"}
    assert r.sismember("s", 3) == 1
    assert r.smismember("s", ["a", "x"]) == [1, 0]
    assert r.srem("s", "a") == 1
    assert r.scard("s") == 2


# -- SPOP SRANDMEMBER -------------------------------------------------------------

@pytest.fixture(params=["intset", "small", "large"])
def filled(request, raw):
    """A set named s of the given shape; returns its members (bytes)."""
    if request.param == "intset":
        ms = [str(i).encode() for i in range(20)]
    elif request.param == "small":
        ms = [f"m{i}".encode() for i in range(20)]
    else:
        ms = [f"m{i}".encode() for i in range(1000)]
    raw.cmd("SADD", "s", *ms)
    return set(ms)


def test_spop_single(raw, filled):
    popped = set()
    for _ in range(5):
        m = raw.cmd("SPOP", "s")
        assert m in filled and m not in popped
        popped.add(m)
    assert members(raw, "s") == filled - popped


def test_spop_count(raw, filled):
    n = len(filled)
    got = raw.cmd("SPOP", "s", "3")
    assert len(got) == 3 and len(set(got)) == 3 and set(got) <= filled
    rest = members(raw, "s")
    assert rest == filled - set(got)
    # more than half of what is left (Redis takes another path there)
    k = (n - 3) * 3 // 4
    got2 = raw.cmd("SPOP", "s", str(k))
    assert len(got2) == k and len(set(got2)) == k and set(got2) <= rest
    rest2 = members(raw, "s")
    assert rest2 == rest - set(got2)
    # a count over the size pops everything and deletes the key
    got3 = raw.cmd("SPOP", "s", str(n * 10))
    assert set(got3) == rest2 and len(got3) == len(rest2)
    assert raw.cmd("EXISTS", "s") == 0


def test_spop_edge_cases(raw):
    assert raw_reply(raw, "SPOP", "nokey") == b"$-1\r\n"
    assert raw_reply(raw, "SPOP", "nokey", "3") == b"*0\r\n"  # not a null array
    assert raw_reply(raw, "SPOP", "nokey", "0") == b"*0\r\n"
    raw.cmd("SADD", "s", "a", "b")
    assert raw_reply(raw, "SPOP", "s", "0") == b"*0\r\n"
    assert raw.cmd("SCARD", "s") == 2
    assert sorted(raw.cmd("SPOP", "s", "2")) == [b"a", b"b"]
    assert raw.cmd("EXISTS", "s") == 0
    raw.cmd("SADD", "s", "x")
    assert raw.cmd("SPOP", "s") == b"x"
    assert raw.cmd("EXISTS", "s") == 0
    raw.cmd("SADD", "s", "a")
    assert raw.cmd("SPOP", "s", "9223372036854775807") == [b"a"]
    raw.cmd("SADD", "s", "a")
    assert raw.cmd("SPOP", "s", "-1") == MUST_BE_POSITIVE
    assert raw.cmd("SPOP", "s", "x") == MUST_BE_POSITIVE
    assert raw.cmd("SPOP", "nokey", "-1") == MUST_BE_POSITIVE
    assert raw.cmd("SPOP", "s", "1", "2") == SYNTAX
    assert raw.cmd("SPOP") == arity("spop")
    assert members(raw, "s") == bset("a")


def test_srandmember(raw, filled):
    n = len(filled)
    for _ in range(10):
        assert raw.cmd("SRANDMEMBER", "s") in filled
    for count in (1, 5, n - 1, n, n + 1, 100000, 9223372036854775807):
        got = raw.cmd("SRANDMEMBER", "s", str(count))
        assert len(got) == min(count, n)
        assert len(set(got)) == len(got), "a positive count returns distinct members"
        assert set(got) <= filled
    got = raw.cmd("SRANDMEMBER", "s", "-3000")
    assert len(got) == 3000  # exactly |count|, repeats allowed
    assert set(got) <= filled
    assert max(Counter(got).values()) > 1
    assert members(raw, "s") == filled  # nothing removed


def test_srandmember_edge_cases(raw):
    assert raw_reply(raw, "SRANDMEMBER", "nokey") == b"$-1\r\n"
    assert raw_reply(raw, "SRANDMEMBER", "nokey", "5") == b"*0\r\n"
    assert raw_reply(raw, "SRANDMEMBER", "nokey", "-5") == b"*0\r\n"
    raw.cmd("SADD", "s", "a")
    assert raw_reply(raw, "SRANDMEMBER", "s", "0") == b"*0\r\n"
    assert raw.cmd("SRANDMEMBER", "s", "-3") == [b"a", b"a", b"a"]
    assert raw.cmd("SRANDMEMBER", "s", "x") == NOT_INT
    assert raw.cmd("SRANDMEMBER", "s", "1.5") == NOT_INT
    assert raw.cmd("SRANDMEMBER", "s", "-9223372036854775808") == Err(
        "ERR value is out of range, value must between "
        "-9223372036854775807 and 9223372036854775807")
    assert raw.cmd("SRANDMEMBER", "s", "1", "2") == SYNTAX
    assert raw.cmd("SRANDMEMBER") == arity("srandmember")


def test_spop_srandmember_redis_py(r):
    r.sadd("s", "a", "b", "c")
    assert r.srandmember("s") in {"a", "b", "c"}
    assert len(r.srandmember("s", -10)) == 10
    assert set(r.spop("s", 2)) < {"a", "b", "c"}
    assert r.scard("s") == 1
    assert r.spop("s") in {"a", "b", "c"}
    assert r.spop("s") is None


# -- SMOVE --------------------------------------------------------------------

def test_smove(raw):
    raw.cmd("SADD", "src", "a", "b")
    raw.cmd("SADD", "dst", "b", "c")
    assert raw.cmd("SMOVE", "src", "dst", "a") == 1
    assert members(raw, "src") == bset("b")
    assert members(raw, "dst") == bset("a", "b", "c")
    # already in the destination: removed from the source all the same
    assert raw.cmd("SMOVE", "src", "dst", "b") == 1
    assert raw.cmd("EXISTS", "src") == 0
    assert members(raw, "dst") == bset("a", "b", "c")
    assert raw.cmd("SMOVE", "src", "dst", "a") == 0
    assert raw.cmd("SMOVE", "dst", "src", "nomember") == 0
    assert raw.cmd("EXISTS", "src") == 0
    # into a new key
    assert raw.cmd("SMOVE", "dst", "new", "c") == 1
    assert members(raw, "new") == bset("c")
    assert raw.cmd("SMOVE", "dst", "new") == arity("smove")


def test_smove_same_key(raw):
    raw.cmd("SADD", "s", "a")
    assert raw.cmd("SMOVE", "s", "s", "a") == 1
    assert raw.cmd("SMOVE", "s", "s", "z") == 0
    assert members(raw, "s") == bset("a")


def test_smove_wrongtype(raw):
    raw.cmd("SADD", "s", "a")
    raw.cmd("SET", "str", "v")
    assert raw.cmd("SMOVE", "s", "str", "a") == WRONGTYPE
    assert raw.cmd("SMOVE", "s", "str", "nomember") == WRONGTYPE
    assert raw.cmd("SMOVE", "str", "s", "a") == WRONGTYPE
    assert members(raw, "s") == bset("a")
    assert raw.cmd("GET", "str") == b"v"
    # a missing source replies 0 before the destination's type is looked at
    assert raw.cmd("SMOVE", "nokey", "str", "a") == 0


def test_smove_intset_to_hashtable(r):
    r.sadd("ints", 1, 2, 3)
    r.sadd("strs", "x")
    assert r.smove("ints", "strs", 2) is True
    assert r.smove("strs", "ints", "x") is True
    assert r.smembers("ints") == {"1", "3", "x"}
    assert r.smembers("strs") == {"2"}


# -- SINTER SUNION SDIFF and their STORE forms ---------------------------------------

@pytest.fixture
def abc(raw):
    raw.cmd("SADD", "a", "1", "2", "3", "4", "x")
    raw.cmd("SADD", "b", "3", "4", "5", "x", "y")
    raw.cmd("SADD", "c", "4", "x", "z")
    return raw


def test_sinter(abc):
    raw = abc
    assert set(raw.cmd("SINTER", "a")) == bset("1", "2", "3", "4", "x")
    assert set(raw.cmd("SINTER", "a", "b")) == bset("3", "4", "x")
    assert set(raw.cmd("SINTER", "a", "b", "c")) == bset("4", "x")
    assert set(raw.cmd("SINTER", "a", "a")) == bset("1", "2", "3", "4", "x")
    assert raw_reply(raw, "SINTER", "a", "nokey") == b"*0\r\n"
    assert raw_reply(raw, "SINTER", "nokey") == b"*0\r\n"
    assert raw.cmd("SINTER") == arity("sinter")


def test_sunion(abc):
    raw = abc
    got = raw.cmd("SUNION", "a", "b", "c", "nokey")
    assert len(got) == len(set(got))
    assert set(got) == bset("1", "2", "3", "4", "5", "x", "y", "z")
    assert set(raw.cmd("SUNION", "c")) == bset("4", "x", "z")
    assert raw_reply(raw, "SUNION", "nokey", "nokey2") == b"*0\r\n"
    assert raw.cmd("SUNION") == arity("sunion")


def test_sdiff(abc):
    raw = abc
    assert set(raw.cmd("SDIFF", "a", "b")) == bset("1", "2")
    assert set(raw.cmd("SDIFF", "a", "b", "c")) == bset("1", "2")
    assert set(raw.cmd("SDIFF", "b", "a")) == bset("5", "y")
    assert set(raw.cmd("SDIFF", "a", "nokey")) == bset("1", "2", "3", "4", "x")
    assert set(raw.cmd("SDIFF", "a")) == bset("1", "2", "3", "4", "x")
    assert raw_reply(raw, "SDIFF", "a", "a") == b"*0\r\n"
    assert raw_reply(raw, "SDIFF", "nokey", "a") == b"*0\r\n"
    assert raw.cmd("SDIFF") == arity("sdiff")


def test_store_forms(abc):
    raw = abc
    assert raw.cmd("SINTERSTORE", "d", "a", "b") == 3
    assert members(raw, "d") == bset("3", "4", "x")
    assert raw.cmd("SUNIONSTORE", "d", "a", "c") == 6
    assert members(raw, "d") == bset("1", "2", "3", "4", "x", "z")
    assert raw.cmd("SDIFFSTORE", "d", "b", "a") == 2
    assert members(raw, "d") == bset("5", "y")
    # the destination may be a source
    assert raw.cmd("SUNIONSTORE", "d", "d", "c") == 5
    assert members(raw, "d") == bset("5", "y", "4", "x", "z")
    assert raw.cmd("SINTERSTORE", "a", "a", "b") == 3
    assert members(raw, "a") == bset("3", "4", "x")
    assert raw.cmd("SDIFFSTORE", "b", "b", "nokey") == 5
    assert members(raw, "b") == bset("3", "4", "5", "x", "y")


def test_store_empty_result_deletes_destination(abc):
    raw = abc
    raw.cmd("SADD", "d", "old")
    assert raw.cmd("SINTERSTORE", "d", "a", "nokey") == 0
    assert raw.cmd("EXISTS", "d") == 0
    raw.cmd("SADD", "d", "old")
    assert raw.cmd("SDIFFSTORE", "d", "a", "a") == 0
    assert raw.cmd("EXISTS", "d") == 0
    raw.cmd("SADD", "d", "old")
    assert raw.cmd("SUNIONSTORE", "d", "nokey", "nokey2") == 0
    assert raw.cmd("EXISTS", "d") == 0


def test_store_overwrites_other_types_and_ttl(abc):
    raw = abc
    raw.cmd("SET", "d", "string", "EX", "100")
    assert raw.cmd("SUNIONSTORE", "d", "c") == 3
    assert raw.cmd("TYPE", "d") == "set"
    assert raw.cmd("TTL", "d") == -1
    raw.cmd("RPUSH", "l", "x")
    assert raw.cmd("SINTERSTORE", "l", "a", "b") == 3
    assert raw.cmd("TYPE", "l") == "set"
    raw.cmd("SET", "e", "string")
    assert raw.cmd("SDIFFSTORE", "e", "nokey") == 0
    assert raw.cmd("EXISTS", "e") == 0


def test_store_arity(raw):
    for cmd in ("SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"):
        assert raw.cmd(cmd) == arity(cmd.lower())
        assert raw.cmd(cmd, "d") == arity(cmd.lower())


@pytest.mark.parametrize("cmd", ["SINTER", "SUNION", "SDIFF"])
def test_set_algebra_wrongtype(abc, cmd):
    raw = abc
    raw.cmd("SET", "str", "v")
    # every key's type is checked, even after a missing key
    assert raw.cmd(cmd, "a", "str") == WRONGTYPE
    assert raw.cmd(cmd, "str", "a") == WRONGTYPE
    assert raw.cmd(cmd, "nokey", "str") == WRONGTYPE
    assert raw.cmd(cmd + "STORE", "d", "a", "str") == WRONGTYPE
    assert raw.cmd(cmd + "STORE", "d", "nokey", "str") == WRONGTYPE
    assert raw.cmd("EXISTS", "d") == 0
    assert raw.cmd("GET", "str") == b"v"


def test_set_algebra_large(r):
    a = {str(i) for i in range(0, 3000, 2)}
    b = {str(i) for i in range(0, 3000, 3)}
    c = {f"s{i}" for i in range(0, 3000, 5)} | {str(i) for i in range(0, 3000, 5)}
    r.sadd("a", *a)
    r.sadd("b", *b)
    r.sadd("c", *c)
    assert r.sinter("a", "b") == a & b
    assert r.sinter("a", "b", "c") == a & b & c
    assert r.sunion("a", "b", "c") == a | b | c
    assert r.sdiff("a", "b", "c") == a - b - c
    assert r.sdiff("c", "a") == c - a
    assert r.sunionstore("u", "a", "b", "c") == len(a | b | c)
    assert r.smembers("u") == a | b | c
    assert r.sintercard(3, ["a", "b", "c"]) == len(a & b & c)


# -- SINTERCARD ---------------------------------------------------------------

def test_sintercard(abc):
    raw = abc
    assert raw.cmd("SINTERCARD", "1", "a") == 5
    assert raw.cmd("SINTERCARD", "2", "a", "b") == 3
    assert raw.cmd("SINTERCARD", "3", "a", "b", "c") == 2
    assert raw.cmd("SINTERCARD", "2", "a", "nokey") == 0
    assert raw.cmd("SINTERCARD", "1", "nokey") == 0
    assert raw.cmd("SINTERCARD", "2", "a", "b", "LIMIT", "0") == 3  # 0: no limit
    assert raw.cmd("SINTERCARD", "2", "a", "b", "LIMIT", "2") == 2
    assert raw.cmd("SINTERCARD", "2", "a", "b", "limit", "1") == 1
    assert raw.cmd("SINTERCARD", "2", "a", "b", "LIMIT", "100") == 3
    assert raw.cmd("SINTERCARD", "2", "a", "a") == 5


def test_sintercard_errors(abc):
    raw = abc
    raw.cmd("SET", "str", "v")
    assert raw.cmd("SINTERCARD", "0", "a") == Err("ERR numkeys should be greater than 0")
    assert raw.cmd("SINTERCARD", "-1", "a") == Err("ERR numkeys should be greater than 0")
    assert raw.cmd("SINTERCARD", "x", "a") == Err("ERR numkeys should be greater than 0")
    assert raw.cmd("SINTERCARD", "3", "a", "b") == Err(
        "ERR Number of keys can't be greater than number of args")
    assert raw.cmd("SINTERCARD", "1", "a", "LIMIT", "-1") == Err("ERR LIMIT can't be negative")
    assert raw.cmd("SINTERCARD", "1", "a", "LIMIT", "x") == Err("ERR LIMIT can't be negative")
    assert raw.cmd("SINTERCARD", "1", "a", "LIMIT") == SYNTAX
    assert raw.cmd("SINTERCARD", "1", "a", "FOO") == SYNTAX
    assert raw.cmd("SINTERCARD", "1") == arity("sintercard")
    assert raw.cmd("SINTERCARD", "1", "str") == WRONGTYPE
    assert raw.cmd("SINTERCARD", "2", "nokey", "str") == WRONGTYPE
    assert raw.cmd("SINTERCARD", "2", "a", "str") == WRONGTYPE


def test_sintercard_redis_py(r):
    r.sadd("a", 1, 2, 3)
    r.sadd("b", 2, 3, 4)
    assert r.sintercard(2, ["a", "b"]) == 2
    assert r.sintercard(2, ["a", "b"], limit=1) == 1


# -- SSCAN --------------------------------------------------------------------

def sscan_all(raw, key, *opts):
    seen = set()
    cursor = b"0"
    for _ in range(100000):
        reply = raw.cmd("SSCAN", key, cursor, *opts)
        assert isinstance(reply, list) and len(reply) == 2, reply
        cursor, batch = reply
        assert isinstance(cursor, bytes) and cursor.isdigit()
        seen.update(batch)
        if cursor == b"0":
            return seen
    raise AssertionError("SSCAN never returned cursor 0")


@pytest.mark.parametrize("kind", ["intset", "small", "large"])
def test_sscan(raw, kind):
    if kind == "intset":
        ms = {str(i).encode() for i in range(100)}
    elif kind == "small":
        ms = {f"m{i}".encode() for i in range(20)}
    else:
        ms = {f"m{i}".encode() for i in range(3000)}
    raw.cmd("SADD", "s", *ms)
    assert sscan_all(raw, "s") == ms
    assert sscan_all(raw, "s", "COUNT", "7") == ms
    assert sscan_all(raw, "s", "COUNT", "100000") == ms
    assert sscan_all(raw, "s", "MATCH", "*1*") == {m for m in ms if b"1" in m}
    assert sscan_all(raw, "s", "MATCH", "*1*", "COUNT", "5") == {m for m in ms if b"1" in m}
    assert sscan_all(raw, "s", "MATCH", "nomatch") == set()


def test_sscan_errors(raw):
    assert raw_reply(raw, "SSCAN", "nokey", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"
    raw.cmd("SADD", "s", "a")
    assert raw.cmd("SSCAN", "s", "x") == Err("ERR invalid cursor")
    assert raw.cmd("SSCAN", "s", "0", "COUNT", "0") == SYNTAX
    assert raw.cmd("SSCAN", "s", "0", "COUNT", "x") == NOT_INT
    assert raw.cmd("SSCAN", "s", "0", "MATCH") == SYNTAX
    assert raw.cmd("SSCAN", "s", "0", "FOO", "x") == SYNTAX
    assert raw.cmd("SSCAN", "s") == arity("sscan")


def test_sscan_redis_py(r):
    ms = {f"k{i}" for i in range(500)}
    r.sadd("s", *ms)
    assert set(r.sscan_iter("s")) == ms
    assert set(r.sscan_iter("s", match="k4*", count=30)) == {m for m in ms if m.startswith("k4")}


# -- types, encodings, RESP3 ------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["SADD", "k", "a"], ["SREM", "k", "a"], ["SCARD", "k"], ["SISMEMBER", "k", "a"],
    ["SMISMEMBER", "k", "a"], ["SMEMBERS", "k"], ["SPOP", "k"], ["SPOP", "k", "2"],
    ["SRANDMEMBER", "k"], ["SRANDMEMBER", "k", "-2"], ["SMOVE", "k", "d", "a"],
    ["SINTER", "k"], ["SUNION", "k"], ["SDIFF", "k"], ["SINTERCARD", "1", "k"],
    ["SINTERSTORE", "d", "k"], ["SUNIONSTORE", "d", "k"], ["SDIFFSTORE", "d", "k"],
    ["SSCAN", "k", "0"],
])
def test_wrongtype(raw, args):
    raw.cmd("HSET", "k", "a", "1")
    assert raw.cmd(*args) == WRONGTYPE
    assert raw.cmd("HGETALL", "k") == [b"a", b"1"]
    assert raw.cmd("EXISTS", "d") == 0


def test_set_keeps_ttl(raw):
    raw.cmd("SADD", "s", "a", "b")
    raw.cmd("EXPIRE", "s", "100")
    raw.cmd("SADD", "s", "c")
    raw.cmd("SREM", "s", "a")
    raw.cmd("SPOP", "s")
    assert 0 < raw.cmd("TTL", "s") <= 100


def test_object_encoding_set(raw):
    raw.cmd("SADD", "ints", "1", "2", "3", "-100")
    assert raw.cmd("OBJECT", "ENCODING", "ints") == b"intset"
    raw.cmd("SADD", "ints", "a")
    assert raw.cmd("OBJECT", "ENCODING", "ints") == b"hashtable"
    raw.cmd("SADD", "strs", "hello")
    assert raw.cmd("OBJECT", "ENCODING", "strs") == b"hashtable"
    raw.cmd("SADD", "many", *[str(i) for i in range(600)])
    assert raw.cmd("OBJECT", "ENCODING", "many") == b"hashtable"
    raw.cmd("SADD", "few", *[str(i) for i in range(500)])
    assert raw.cmd("OBJECT", "ENCODING", "few") == b"intset"


def test_set_resp3(raw):
    assert isinstance(raw.cmd("HELLO", "3"), Map)
    assert raw_reply(raw, "SMEMBERS", "nokey") == b"~0\r\n"
    raw.cmd("SADD", "s", "a")
    assert raw_reply(raw, "SMEMBERS", "s") == b"~1\r\n$1\r\na\r\n"
    assert raw_reply(raw, "SUNION", "s", "nokey") == b"~1\r\n$1\r\na\r\n"
    assert raw_reply(raw, "SINTER", "s", "nokey") == b"~0\r\n"
    assert raw_reply(raw, "SDIFF", "s") == b"~1\r\n$1\r\na\r\n"
    assert raw_reply(raw, "SMISMEMBER", "s", "a", "b") == b"*2\r\n:1\r\n:0\r\n"
    assert raw_reply(raw, "SRANDMEMBER", "s", "2") == b"*1\r\n$1\r\na\r\n"  # an array
    assert raw_reply(raw, "SRANDMEMBER", "nokey") == b"_\r\n"
    assert raw_reply(raw, "SPOP", "s", "2") == b"~1\r\n$1\r\na\r\n"  # a set
    assert raw_reply(raw, "SPOP", "s") == b"_\r\n"
    assert isinstance(raw.cmd("SMEMBERS", "nokey"), RSet)
