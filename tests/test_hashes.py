"""Hash commands end to end (HSET HSETNX HGET HMGET HMSET HDEL HLEN HSTRLEN
HEXISTS HKEYS HVALS HGETALL HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN), each reply
and error string as redis-server 7.0 sends it. Where Redis leaves the order
of fields open (HGETALL, HKEYS, HSCAN, HRANDFIELD) only the contents are
compared."""

from collections import Counter

import pytest

from shoaltest import Err, Map, encode

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = Err("ERR value is not an integer or out of range")
SYNTAX = Err("ERR syntax error")
NOT_FLOAT = Err("ERR value is not a valid float")


def arity(cmd):
    return Err(f"ERR wrong number of arguments for '{cmd}' command")


def raw_reply(c, *args):
    c.send(encode(*args))
    return c.reply_bytes()


def pairs(flat):
    """[f1, v1, f2, v2] -> {f1: v1, f2: v2}, checking no field repeats."""
    assert len(flat) % 2 == 0
    d = dict(zip(flat[::2], flat[1::2]))
    assert len(d) == len(flat) // 2, f"a field repeats in {flat!r}"
    return d


# -- HSET HSETNX HMSET HGET HMGET ------------------------------------------------

def test_hset_hget(raw):
    assert raw.cmd("HGET", "h", "f") is None
    assert raw.cmd("HSET", "h", "f", "v") == 1
    assert raw.cmd("HGET", "h", "f") == b"v"
    assert raw.cmd("HSET", "h", "f", "w") == 0  # an update adds nothing
    assert raw.cmd("HGET", "h", "f") == b"w"
    assert raw.cmd("HSET", "h", "a", "1", "b", "2", "f", "x") == 2
    assert raw.cmd("HGET", "h", "f") == b"x"
    assert raw.cmd("HGET", "h", "nofield") is None
    assert raw.cmd("HGET", "nokey", "f") is None
    assert raw.cmd("TYPE", "h") == "hash"


def test_hset_same_field_twice_in_one_call(raw):
    assert raw.cmd("HSET", "h", "f", "1", "f", "2") == 1
    assert raw.cmd("HGET", "h", "f") == b"2"
    assert raw.cmd("HLEN", "h") == 1


def test_hset_binary_and_empty(rb):
    assert rb.hset("h", mapping={b"": b"empty field", b"\x00\xff": b"", b"big": b"x" * 100000}) == 3
    assert rb.hget("h", b"") == b"empty field"
    assert rb.hget("h", b"\x00\xff") == b""
    assert rb.hstrlen("h", b"big") == 100000
    assert rb.hgetall("h") == {b"": b"empty field", b"\x00\xff": b"", b"big": b"x" * 100000}


def test_hset_arity(raw):
    assert raw.cmd("HSET", "h") == arity("hset")
    assert raw.cmd("HSET", "h", "f") == arity("hset")
    assert raw.cmd("HSET", "h", "f", "v", "g") == arity("hset")
    assert raw.cmd("HMSET", "h", "f", "v", "g") == arity("hmset")
    assert raw.cmd("HSETNX", "h", "f") == arity("hsetnx")
    assert raw.cmd("HGET", "h") == arity("hget")
    assert raw.cmd("HMGET", "h") == arity("hmget")
    assert raw.cmd("EXISTS", "h") == 0


def test_hmset(raw):
    assert raw.cmd("HMSET", "h", "a", "1", "b", "2") == "OK"
    assert raw.cmd("HMSET", "h", "a", "3") == "OK"
    assert raw.cmd("HMGET", "h", "a", "b") == [b"3", b"2"]


def test_hsetnx(raw):
    assert raw.cmd("HSETNX", "h", "f", "1") == 1
    assert raw.cmd("HSETNX", "h", "f", "2") == 0
    assert raw.cmd("HGET", "h", "f") == b"1"
    assert raw.cmd("HSETNX", "h", "g", "3") == 1
    assert raw.cmd("HLEN", "h") == 2


def test_hmget(raw):
    raw.cmd("HSET", "h", "a", "1", "b", "2")
    assert raw.cmd("HMGET", "h", "a", "nofield", "b", "a") == [b"1", None, b"2", b"1"]
    assert raw_reply(raw, "HMGET", "nokey", "a", "b") == b"*2\r\n$-1\r\n$-1\r\n"


def test_hash_redis_py(r):
    assert r.hset("h", "f", "v") == 1
    assert r.hset("h", mapping={"a": 1, "b": 2}) == 2
    assert r.hget("h", "a") == "1"
    assert r.hmget("h", ["a", "b", "c"]) == ["1", "2", None]
    assert r.hgetall("h") == {"f": "v", "a": "1", "b": "2"}
    assert r.hsetnx("h", "a", "x") == 0
    assert r.hexists("h", "a") is True
    assert r.hexists("h", "x") is False


# -- HDEL HLEN HSTRLEN HEXISTS ----------------------------------------------------

def test_hdel(raw):
    raw.cmd("HSET", "h", "a", "1", "b", "2", "c", "3")
    assert raw.cmd("HDEL", "h", "a") == 1
    assert raw.cmd("HDEL", "h", "a") == 0
    assert raw.cmd("HDEL", "h", "b", "b", "nofield") == 1
    assert raw.cmd("HDEL", "nokey", "a") == 0
    assert raw.cmd("HLEN", "h") == 1
    # the last field gone: the key is gone
    assert raw.cmd("HDEL", "h", "c") == 1
    assert raw.cmd("EXISTS", "h") == 0
    assert raw.cmd("TYPE", "h") == "none"
    assert raw.cmd("HDEL", "h") == arity("hdel")


def test_hlen_hstrlen_hexists(raw):
    assert raw.cmd("HLEN", "h") == 0
    raw.cmd("HSET", "h", "a", "hello", "n", "-12345", "e", "")
    assert raw.cmd("HLEN", "h") == 3
    assert raw.cmd("HSTRLEN", "h", "a") == 5
    assert raw.cmd("HSTRLEN", "h", "n") == 6  # integers count as their text
    assert raw.cmd("HSTRLEN", "h", "e") == 0
    assert raw.cmd("HSTRLEN", "h", "nofield") == 0
    assert raw.cmd("HSTRLEN", "nokey", "a") == 0
    assert raw.cmd("HEXISTS", "h", "a") == 1
    assert raw.cmd("HEXISTS", "h", "e") == 1
    assert raw.cmd("HEXISTS", "h", "nofield") == 0
    assert raw.cmd("HEXISTS", "nokey", "a") == 0
    assert raw.cmd("HLEN") == arity("hlen")
    assert raw.cmd("HSTRLEN", "h") == arity("hstrlen")
    assert raw.cmd("HEXISTS", "h") == arity("hexists")


# -- HKEYS HVALS HGETALL ----------------------------------------------------------

def test_hkeys_hvals_hgetall(raw):
    assert raw_reply(raw, "HKEYS", "nokey") == b"*0\r\n"
    assert raw_reply(raw, "HVALS", "nokey") == b"*0\r\n"
    assert raw_reply(raw, "HGETALL", "nokey") == b"*0\r\n"
    raw.cmd("HSET", "h", "a", "1", "b", "2", "c", "3")
    keys = raw.cmd("HKEYS", "h")
    vals = raw.cmd("HVALS", "h")
    flat = raw.cmd("HGETALL", "h")
    assert sorted(keys) == [b"a", b"b", b"c"]
    assert sorted(vals) == [b"1", b"2", b"3"]
    assert pairs(flat) == {b"a": b"1", b"b": b"2", b"c": b"3"}
    # the three walk the fields in the same order
    assert keys == flat[::2] and vals == flat[1::2]


@pytest.mark.parametrize("n", [10, 1000])
def test_hgetall_large(r, n):
    d = {f"field:{i}": f"value:{i}" for i in range(n)}
    assert r.hset("h", mapping=d) == n
    assert r.hlen("h") == n
    assert r.hgetall("h") == d
    assert sorted(r.hkeys("h")) == sorted(d)
    assert sorted(r.hvals("h")) == sorted(d.values())
    assert r.hkeys("h") == list(r.hgetall("h"))


# -- HINCRBY HINCRBYFLOAT ---------------------------------------------------------

def test_hincrby(raw):
    assert raw.cmd("HINCRBY", "h", "n", "5") == 5  # creates key and field
    assert raw.cmd("HINCRBY", "h", "n", "-10") == -5
    assert raw.cmd("HINCRBY", "h", "n", "0") == -5
    assert raw.cmd("HGET", "h", "n") == b"-5"
    raw.cmd("HSET", "h", "m", "9223372036854775806")
    assert raw.cmd("HINCRBY", "h", "m", "1") == 9223372036854775807
    assert raw.cmd("HINCRBY", "h", "m", "1") == Err("ERR increment or decrement would overflow")
    raw.cmd("HSET", "h", "m", "-9223372036854775807")
    assert raw.cmd("HINCRBY", "h", "m", "-1") == -9223372036854775808
    assert raw.cmd("HINCRBY", "h", "m", "-1") == Err("ERR increment or decrement would overflow")
    assert raw.cmd("HGET", "h", "m") == b"-9223372036854775808"


def test_hincrby_errors(raw):
    raw.cmd("HSET", "h", "s", "abc", "sp", " 1", "f", "1.5", "n", "1")
    for field in ("s", "sp", "f"):
        assert raw.cmd("HINCRBY", "h", field, "1") == Err("ERR hash value is not an integer")
    assert raw.cmd("HINCRBY", "h", "n", "x") == NOT_INT
    assert raw.cmd("HINCRBY", "h", "n", "1.5") == NOT_INT
    assert raw.cmd("HINCRBY", "h", "n", "99999999999999999999") == NOT_INT
    assert raw.cmd("HINCRBY", "h", "n") == arity("hincrby")
    assert raw.cmd("HGET", "h", "n") == b"1"
    assert raw.cmd("HINCRBY", "new", "n", "x") == NOT_INT
    assert raw.cmd("EXISTS", "new") == 0


@pytest.mark.parametrize("start,incr,result", [
    (None, "1.5", b"1.5"),
    (None, "3", b"3"),
    ("1.10", "2.2", b"3.3"),
    ("0.1", "0.2", b"0.3"),
    ("10.50", "0.1", b"10.6"),
    ("5", "1.5", b"6.5"),
    ("1.0e3", "0", b"1000"),
    ("3.0e3", "200", b"3200"),
    ("1", "-1", b"0"),
    ("-2.5", "1", b"-1.5"),
    ("17179869184", "1.5", b"17179869185.5"),
])
def test_hincrbyfloat(raw, start, incr, result):
    if start is not None:
        raw.cmd("HSET", "h", "f", start)
    assert raw.cmd("HINCRBYFLOAT", "h", "f", incr) == result
    assert raw.cmd("HGET", "h", "f") == result


def test_hincrbyfloat_errors(raw):
    raw.cmd("HSET", "h", "s", "abc", "sp", " 1", "n", "1", "inf", "inf")
    assert raw.cmd("HINCRBYFLOAT", "h", "s", "1") == Err("ERR hash value is not a float")
    assert raw.cmd("HINCRBYFLOAT", "h", "sp", "1") == Err("ERR hash value is not a float")
    assert raw.cmd("HINCRBYFLOAT", "h", "n", "x") == NOT_FLOAT
    assert raw.cmd("HINCRBYFLOAT", "h", "n", "nan") == NOT_FLOAT
    assert raw.cmd("HINCRBYFLOAT", "h", "n", "") == NOT_FLOAT
    # an infinite increment and an infinite result are told apart
    assert raw.cmd("HINCRBYFLOAT", "h", "n", "inf") == Err("ERR value is NaN or Infinity")
    assert raw.cmd("HINCRBYFLOAT", "h", "n", "-inf") == Err("ERR value is NaN or Infinity")
    assert raw.cmd("HINCRBYFLOAT", "h", "inf", "1") == Err(
        "ERR increment would produce NaN or Infinity")
    assert raw.cmd("HINCRBYFLOAT", "h", "n") == arity("hincrbyfloat")
    assert raw.cmd("HGET", "h", "n") == b"1"
    assert raw.cmd("HGET", "h", "inf") == b"inf"


def test_hincrbyfloat_redis_py(r):
    assert r.hincrbyfloat("h", "f", 1.5) == 1.5
    assert r.hincrbyfloat("h", "f", -0.5) == 1.0
    assert r.hget("h", "f") == "1"
    assert r.hincrby("h", "i", 7) == 7


# -- HRANDFIELD ---------------------------------------------------------------

@pytest.fixture(params=["small", "large"])
def hsize(request):
    return 5 if request.param == "small" else 700


def test_hrandfield_single(raw, hsize):
    fields = {f"f{i}".encode(): f"v{i}".encode() for i in range(hsize)}
    raw.cmd("HSET", "h", *[x for kv in fields.items() for x in kv])
    for _ in range(20):
        assert raw.cmd("HRANDFIELD", "h") in fields
    assert raw_reply(raw, "HRANDFIELD", "nokey") == b"$-1\r\n"


def test_hrandfield_positive_count_distinct(raw, hsize):
    fields = {f"f{i}".encode(): f"v{i}".encode() for i in range(hsize)}
    raw.cmd("HSET", "h", *[x for kv in fields.items() for x in kv])
    for count in (1, 3, hsize - 1, hsize, hsize + 10, 100000):
        got = raw.cmd("HRANDFIELD", "h", str(count))
        assert len(got) == min(count, hsize)
        assert len(set(got)) == len(got), "a positive count returns distinct fields"
        assert set(got) <= set(fields)
        got = raw.cmd("HRANDFIELD", "h", str(count), "WITHVALUES")
        d = pairs(got)
        assert len(d) == min(count, hsize)
        assert all(fields[f] == v for f, v in d.items())
    got = raw.cmd("HRANDFIELD", "h", "9223372036854775807")
    assert sorted(got) == sorted(fields)
    assert raw.cmd("HLEN", "h") == hsize  # nothing removed


def test_hrandfield_negative_count_repeats(raw, hsize):
    fields = {f"f{i}".encode(): f"v{i}".encode() for i in range(hsize)}
    raw.cmd("HSET", "h", *[x for kv in fields.items() for x in kv])
    got = raw.cmd("HRANDFIELD", "h", "-2000")
    assert len(got) == 2000  # exactly |count|, repeats allowed
    assert set(got) <= set(fields)
    if hsize == 5:
        assert max(Counter(got).values()) > 1
    got = raw.cmd("HRANDFIELD", "h", "-50", "WITHVALUES")
    assert len(got) == 100
    for f, v in zip(got[::2], got[1::2]):
        assert fields[f] == v


def test_hrandfield_zero_and_missing(raw):
    raw.cmd("HSET", "h", "a", "1")
    assert raw_reply(raw, "HRANDFIELD", "h", "0") == b"*0\r\n"
    assert raw_reply(raw, "HRANDFIELD", "h", "0", "WITHVALUES") == b"*0\r\n"
    assert raw_reply(raw, "HRANDFIELD", "nokey", "3") == b"*0\r\n"
    assert raw_reply(raw, "HRANDFIELD", "nokey", "-3", "WITHVALUES") == b"*0\r\n"
    assert raw.cmd("HRANDFIELD", "h", "-3") == [b"a", b"a", b"a"]
    assert raw.cmd("HRANDFIELD", "h", "-2", "WITHVALUES") == [b"a", b"1", b"a", b"1"]


def test_hrandfield_errors(raw):
    raw.cmd("HSET", "h", "a", "1")
    assert raw.cmd("HRANDFIELD", "h", "x") == NOT_INT
    assert raw.cmd("HRANDFIELD", "h", "1.5") == NOT_INT
    assert raw.cmd("HRANDFIELD", "h", "1", "FOO") == SYNTAX
    assert raw.cmd("HRANDFIELD", "h", "1", "WITHVALUES", "FOO") == SYNTAX
    assert raw.cmd("HRANDFIELD", "h", "-9223372036854775808") == Err(
        "ERR value is out of range, value must between "
        "-9223372036854775807 and 9223372036854775807")
    # WITHVALUES doubles the count, so the largest counts are refused
    assert raw.cmd("HRANDFIELD", "h", "9223372036854775807", "WITHVALUES") == Err(
        "ERR value is out of range")
    assert raw.cmd("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES") == Err(
        "ERR value is out of range")
    assert raw.cmd("HRANDFIELD") == arity("hrandfield")


def test_hrandfield_redis_py(r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    assert r.hrandfield("h") in ("a", "b")
    assert sorted(r.hrandfield("h", 5)) == ["a", "b"]
    got = r.hrandfield("h", -4, withvalues=True)
    assert len(got) == 8


# -- HSCAN --------------------------------------------------------------------

def hscan_all(raw, key, *opts):
    """Every field/value HSCAN returns, following the cursor until 0."""
    seen = {}
    cursor = b"0"
    for _ in range(100000):
        reply = raw.cmd("HSCAN", key, cursor, *opts)
        assert isinstance(reply, list) and len(reply) == 2, reply
        cursor, flat = reply
        assert isinstance(cursor, bytes) and cursor.isdigit()
        assert len(flat) % 2 == 0
        for f, v in zip(flat[::2], flat[1::2]):
            assert seen.get(f, v) == v
            seen[f] = v
        if cursor == b"0":
            return seen
    raise AssertionError("HSCAN never returned cursor 0")


@pytest.mark.parametrize("n", [7, 2000])
def test_hscan_full(raw, n):
    fields = {f"f{i}".encode(): f"v{i}".encode() for i in range(n)}
    raw.cmd("HSET", "h", *[x for kv in fields.items() for x in kv])
    assert hscan_all(raw, "h") == fields
    assert hscan_all(raw, "h", "COUNT", "3") == fields
    assert hscan_all(raw, "h", "COUNT", "1000") == fields


@pytest.mark.parametrize("n", [7, 2000])
def test_hscan_match(raw, n):
    fields = {f"f{i}".encode(): f"v{i}".encode() for i in range(n)}
    raw.cmd("HSET", "h", *[x for kv in fields.items() for x in kv])
    want = {f: v for f, v in fields.items() if f.startswith(b"f1")}
    assert hscan_all(raw, "h", "MATCH", "f1*") == want
    assert hscan_all(raw, "h", "MATCH", "f1*", "COUNT", "50") == want
    assert hscan_all(raw, "h", "COUNT", "50", "MATCH", "f1*") == want
    assert hscan_all(raw, "h", "MATCH", "nomatch*") == {}
    assert hscan_all(raw, "h", "MATCH", "f?") == {f: v for f, v in fields.items() if len(f) == 2}
    # MATCH looks at fields, not values
    assert hscan_all(raw, "h", "MATCH", "v*") == {}


def test_hscan_missing_and_errors(raw):
    assert raw_reply(raw, "HSCAN", "nokey", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"
    raw.cmd("HSET", "h", "a", "1")
    assert raw.cmd("HSCAN", "h", "x") == Err("ERR invalid cursor")
    assert raw.cmd("HSCAN", "h", "0", "COUNT", "0") == SYNTAX
    assert raw.cmd("HSCAN", "h", "0", "COUNT", "-1") == SYNTAX
    assert raw.cmd("HSCAN", "h", "0", "COUNT", "x") == NOT_INT
    assert raw.cmd("HSCAN", "h", "0", "COUNT") == SYNTAX
    assert raw.cmd("HSCAN", "h", "0", "MATCH") == SYNTAX
    assert raw.cmd("HSCAN", "h", "0", "FOO", "bar") == SYNTAX
    assert raw.cmd("HSCAN", "h", "0", "TYPE", "string") == SYNTAX  # SCAN only
    assert raw.cmd("HSCAN", "h") == arity("hscan")


def test_hscan_redis_py(r):
    d = {f"k{i}": str(i) for i in range(300)}
    r.hset("h", mapping=d)
    assert dict(r.hscan_iter("h")) == d
    assert dict(r.hscan_iter("h", match="k1*", count=20)) == {
        k: v for k, v in d.items() if k.startswith("k1")}


# -- types, encodings, RESP3 ------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["HSET", "s", "f", "v"], ["HSETNX", "s", "f", "v"], ["HMSET", "s", "f", "v"],
    ["HGET", "s", "f"], ["HMGET", "s", "f"], ["HDEL", "s", "f"], ["HLEN", "s"],
    ["HSTRLEN", "s", "f"], ["HEXISTS", "s", "f"], ["HKEYS", "s"], ["HVALS", "s"],
    ["HGETALL", "s"], ["HINCRBY", "s", "f", "1"], ["HINCRBYFLOAT", "s", "f", "1"],
    ["HRANDFIELD", "s"], ["HRANDFIELD", "s", "2", "WITHVALUES"], ["HSCAN", "s", "0"],
])
def test_wrongtype(raw, args):
    raw.cmd("RPUSH", "s", "x")
    assert raw.cmd(*args) == WRONGTYPE
    assert raw.cmd("LRANGE", "s", "0", "-1") == [b"x"]


def test_hash_keeps_ttl(raw):
    raw.cmd("HSET", "h", "a", "1")
    raw.cmd("EXPIRE", "h", "100")
    raw.cmd("HSET", "h", "b", "2")
    raw.cmd("HDEL", "h", "a")
    raw.cmd("HINCRBY", "h", "c", "1")
    assert 0 < raw.cmd("TTL", "h") <= 100


def test_object_encoding_hash(raw):
    raw.cmd("HSET", "small", "a", "1", "b", "2")
    assert raw.cmd("OBJECT", "ENCODING", "small") == b"listpack"
    raw.cmd("HSET", "many", *[x for i in range(600) for x in (f"f{i}", "v")])
    assert raw.cmd("OBJECT", "ENCODING", "many") == b"hashtable"
    raw.cmd("HSET", "longval", "a", "1")
    raw.cmd("HSET", "longval", "b", "x" * 100)
    assert raw.cmd("OBJECT", "ENCODING", "longval") == b"hashtable"
    raw.cmd("HSET", "longfield", "y" * 100, "1")
    assert raw.cmd("OBJECT", "ENCODING", "longfield") == b"hashtable"


def test_hash_resp3(raw):
    assert isinstance(raw.cmd("HELLO", "3"), Map)
    assert raw_reply(raw, "HGETALL", "nokey") == b"%0\r\n"
    raw.cmd("HSET", "h", "a", "1")
    assert raw_reply(raw, "HGETALL", "h") == b"%1\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert raw_reply(raw, "HMGET", "h", "a", "b") == b"*2\r\n$1\r\n1\r\n_\r\n"
    assert raw_reply(raw, "HGET", "h", "b") == b"_\r\n"
    assert raw_reply(raw, "HRANDFIELD", "nokey") == b"_\r\n"
    # WITHVALUES pairs are nested in RESP3
    assert raw_reply(raw, "HRANDFIELD", "h", "1", "WITHVALUES") == (
        b"*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n")
    assert raw_reply(raw, "HRANDFIELD", "h", "-2", "WITHVALUES") == (
        b"*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n")
    assert raw_reply(raw, "HRANDFIELD", "h", "1") == b"*1\r\n$1\r\na\r\n"
    # HSCAN stays a flat array; HINCRBYFLOAT a bulk string
    assert raw_reply(raw, "HSCAN", "h", "0") == b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert raw_reply(raw, "HINCRBYFLOAT", "h", "a", "1") == b"$1\r\n2\r\n"


def test_listpack_thresholds_keep_insertion_order(raw):
    """While a hash is within hash-max-listpack-entries/-value Redis keeps
    it as a listpack, in insertion order, however large its values; the
    thresholds raised, a 74 KB hash still answers HGETALL in that order,
    and once they are lowered again the next write may reorder it."""
    raw.cmd("DEL", "lp")
    try:
        assert raw.cmd("CONFIG", "SET", "hash-max-ziplist-entries", "1000000000",
                       "hash-max-ziplist-value", "1000000000") == "OK"
        fields = [("small", b"127"), ("mid", b"x" * 8191), ("big", b"y" * 65535),
                  ("last", b"12")]
        for f, v in fields:
            assert raw.cmd("HSET", "lp", f, v) == 1
        flat = raw.cmd("HGETALL", "lp")
        assert flat[0::2] == [f.encode() for f, _ in fields]
        assert flat[1::2] == [v for _, v in fields]
        assert raw.cmd("HKEYS", "lp") == [f.encode() for f, _ in fields]
    finally:
        raw.cmd("CONFIG", "SET", "hash-max-listpack-entries", "512",
                "hash-max-listpack-value", "64")
    # Back at Redis's defaults: a field over 64 bytes makes it a table.
    raw.cmd("HSET", "lp", "after", "1")
    assert sorted(raw.cmd("HKEYS", "lp")) == sorted(
        [b"small", b"mid", b"big", b"last", b"after"])
    raw.cmd("DEL", "lp")
