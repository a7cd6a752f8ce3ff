"""List commands end to end (LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE
LINDEX LSET LINSERT LREM LTRIM LPOS LMOVE RPOPLPUSH LMPOP), each reply and
error string as redis-server 7.0 sends it. The blocking variants are in
test_blocking.py."""

import pytest

from shoaltest import Err, encode

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = Err("ERR value is not an integer or out of range")
SYNTAX = Err("ERR syntax error")
MUST_BE_POSITIVE = Err("ERR value is out of range, must be positive")


def arity(cmd):
    return Err(f"ERR wrong number of arguments for '{cmd}' command")


def raw_reply(c, *args):
    """The exact bytes of the reply to one command."""
    c.send(encode(*args))
    return c.reply_bytes()


def lrange(raw, key):
    return raw.cmd("LRANGE", key, "0", "-1")


# -- LPUSH RPUSH LPUSHX RPUSHX ----------------------------------------------------

def test_lpush_rpush_order(raw):
    assert raw.cmd("RPUSH", "l", "a") == 1
    assert raw.cmd("RPUSH", "l", "b", "c") == 3
    assert raw.cmd("LPUSH", "l", "x", "y") == 5  # each pushed to the head in turn
    assert lrange(raw, "l") == [b"y", b"x", b"a", b"b", b"c"]
    assert raw.cmd("TYPE", "l") == "list"


def test_push_duplicates_binary_and_empty(rb):
    assert rb.rpush("l", b"", b"\x00\xff", b"", b"a" * 10000) == 4
    assert rb.lrange("l", 0, -1) == [b"", b"\x00\xff", b"", b"a" * 10000]
    assert rb.llen("l") == 4


def test_lpushx_rpushx(raw):
    assert raw.cmd("LPUSHX", "l", "a") == 0
    assert raw.cmd("RPUSHX", "l", "a", "b") == 0
    assert raw.cmd("EXISTS", "l") == 0
    raw.cmd("RPUSH", "l", "m")
    assert raw.cmd("LPUSHX", "l", "a", "b") == 3
    assert raw.cmd("RPUSHX", "l", "y", "z") == 5
    assert lrange(raw, "l") == [b"b", b"a", b"m", b"y", b"z"]


def test_push_arity(raw):
    for cmd in ("LPUSH", "RPUSH", "LPUSHX", "RPUSHX"):
        assert raw.cmd(cmd) == arity(cmd.lower())
        assert raw.cmd(cmd, "l") == arity(cmd.lower())
    assert raw.cmd("EXISTS", "l") == 0


def test_push_redis_py(r):
    assert r.rpush("l", 1, 2, 3) == 3
    assert r.lpush("l", 0) == 4
    assert r.lrange("l", 0, -1) == ["0", "1", "2", "3"]


# -- LPOP RPOP ----------------------------------------------------------------

def test_lpop_rpop_single(raw):
    assert raw.cmd("LPOP", "l") is None
    assert raw.cmd("RPOP", "l") is None
    raw.cmd("RPUSH", "l", "a", "b", "c")
    assert raw.cmd("LPOP", "l") == b"a"
    assert raw.cmd("RPOP", "l") == b"c"
    assert raw.cmd("LLEN", "l") == 1
    assert raw.cmd("LPOP", "l") == b"b"
    # the last element gone: the key is gone
    assert raw.cmd("EXISTS", "l") == 0
    assert raw.cmd("TYPE", "l") == "none"


def test_lpop_rpop_count(raw):
    raw.cmd("RPUSH", "l", "a", "b", "c", "d", "e")
    assert raw.cmd("LPOP", "l", "2") == [b"a", b"b"]
    assert raw.cmd("RPOP", "l", "2") == [b"e", b"d"]
    assert raw.cmd("LPOP", "l", "1") == [b"c"]  # a count replies an array, even of one
    assert raw.cmd("EXISTS", "l") == 0
    raw.cmd("RPUSH", "l", "a", "b", "c")
    assert raw.cmd("RPOP", "l", "100") == [b"c", b"b", b"a"]
    assert raw.cmd("EXISTS", "l") == 0
    raw.cmd("RPUSH", "l", "a", "b")
    assert raw.cmd("LPOP", "l", "9223372036854775807") == [b"a", b"b"]
    assert raw.cmd("EXISTS", "l") == 0


def test_pop_count_reply_bytes(raw):
    # a missing key with a count: a null array; without one: a null bulk string
    assert raw_reply(raw, "LPOP", "nokey") == b"$-1\r\n"
    assert raw_reply(raw, "RPOP", "nokey", "3") == b"*-1\r\n"
    assert raw_reply(raw, "LPOP", "nokey", "0") == b"*-1\r\n"
    raw.cmd("RPUSH", "l", "a")
    # count 0 on a list: an empty array, nothing removed
    assert raw_reply(raw, "LPOP", "l", "0") == b"*0\r\n"
    assert raw_reply(raw, "RPOP", "l", "0") == b"*0\r\n"
    assert raw.cmd("LLEN", "l") == 1
    assert raw_reply(raw, "RPOP", "l", "1") == b"*1\r\n$1\r\na\r\n"


def test_pop_count_errors(raw):
    raw.cmd("RPUSH", "l", "a")
    for cmd in ("LPOP", "RPOP"):
        assert raw.cmd(cmd, "l", "-1") == MUST_BE_POSITIVE
        assert raw.cmd(cmd, "l", "x") == MUST_BE_POSITIVE
        assert raw.cmd(cmd, "l", "1.5") == MUST_BE_POSITIVE
        assert raw.cmd(cmd, "nokey", "-1") == MUST_BE_POSITIVE
        assert raw.cmd(cmd, "l", "1", "2") == arity(cmd.lower())
        assert raw.cmd(cmd) == arity(cmd.lower())
    assert lrange(raw, "l") == [b"a"]


def test_pop_redis_py(r):
    r.rpush("l", "a", "b", "c")
    assert r.lpop("l") == "a"
    assert r.rpop("l", 5) == ["c", "b"]
    assert r.lpop("l") is None
    assert r.lpop("l", 2) is None


# -- LLEN LRANGE LINDEX -----------------------------------------------------------

def test_llen(raw):
    assert raw.cmd("LLEN", "l") == 0
    raw.cmd("RPUSH", "l", *[str(i) for i in range(100)])
    assert raw.cmd("LLEN", "l") == 100
    assert raw.cmd("LLEN") == arity("llen")
    assert raw.cmd("LLEN", "a", "b") == arity("llen")


@pytest.mark.parametrize("start,stop,want", [
    ("0", "-1", "abcde"),
    ("0", "0", "a"),
    ("1", "3", "bcd"),
    ("-2", "-1", "de"),
    ("-100", "1", "ab"),
    ("2", "100", "cde"),
    ("-100", "100", "abcde"),
    ("3", "1", ""),
    ("5", "10", ""),
    ("-1", "-2", ""),
    ("-100", "-50", ""),
    ("0", "-100", ""),
    ("0", "9223372036854775807", "abcde"),
    ("-9223372036854775808", "-1", "abcde"),
    ("9223372036854775807", "-1", ""),
])
def test_lrange(raw, start, stop, want):
    raw.cmd("RPUSH", "l", *"abcde")
    assert raw.cmd("LRANGE", "l", start, stop) == [c.encode() for c in want]


def test_lrange_missing_and_errors(raw):
    assert raw_reply(raw, "LRANGE", "nokey", "0", "-1") == b"*0\r\n"
    raw.cmd("RPUSH", "l", "a")
    assert raw.cmd("LRANGE", "l", "x", "1") == NOT_INT
    assert raw.cmd("LRANGE", "l", "0", "1.0") == NOT_INT
    assert raw.cmd("LRANGE", "l", "0", "99999999999999999999") == NOT_INT
    assert raw.cmd("LRANGE", "l", "0") == arity("lrange")


def test_lrange_long_list(r):
    values = [f"v{i}" for i in range(5000)]
    for i in range(0, len(values), 1000):
        r.rpush("l", *values[i:i + 1000])
    assert r.llen("l") == 5000
    assert r.lrange("l", 0, -1) == values
    assert r.lrange("l", 1234, 1240) == values[1234:1241]
    assert r.lrange("l", -10, -1) == values[-10:]
    assert r.lindex("l", 2500) == "v2500"
    assert r.lindex("l", -5000) == "v0"


def test_lindex(raw):
    raw.cmd("RPUSH", "l", "a", "b", "c")
    assert raw.cmd("LINDEX", "l", "0") == b"a"
    assert raw.cmd("LINDEX", "l", "2") == b"c"
    assert raw.cmd("LINDEX", "l", "-1") == b"c"
    assert raw.cmd("LINDEX", "l", "-3") == b"a"
    assert raw.cmd("LINDEX", "l", "3") is None
    assert raw.cmd("LINDEX", "l", "-4") is None
    assert raw.cmd("LINDEX", "l", "9223372036854775807") is None
    assert raw.cmd("LINDEX", "nokey", "0") is None
    assert raw.cmd("LINDEX", "l", "x") == NOT_INT
    assert raw.cmd("LINDEX", "l") == arity("lindex")


# -- LSET LINSERT LREM LTRIM ------------------------------------------------------

def test_lset(raw):
    raw.cmd("RPUSH", "l", "a", "b", "c")
    assert raw.cmd("LSET", "l", "0", "x") == "OK"
    assert raw.cmd("LSET", "l", "-1", "z") == "OK"
    assert raw.cmd("LSET", "l", "1", "y" * 1000) == "OK"
    assert lrange(raw, "l") == [b"x", b"y" * 1000, b"z"]
    assert raw.cmd("LSET", "l", "3", "q") == Err("ERR index out of range")
    assert raw.cmd("LSET", "l", "-4", "q") == Err("ERR index out of range")
    assert raw.cmd("LSET", "nokey", "0", "q") == Err("ERR no such key")
    assert raw.cmd("EXISTS", "nokey") == 0
    assert raw.cmd("LSET", "l", "x", "q") == NOT_INT
    assert raw.cmd("LSET", "l", "0") == arity("lset")


def test_linsert(raw):
    raw.cmd("RPUSH", "l", "a", "b", "a")
    assert raw.cmd("LINSERT", "l", "BEFORE", "a", "x") == 4  # the first match only
    assert raw.cmd("LINSERT", "l", "after", "b", "y") == 5
    assert raw.cmd("LINSERT", "l", "AFTER", "a", "z") == 6
    assert lrange(raw, "l") == [b"x", b"a", b"z", b"b", b"y", b"a"]
    assert raw.cmd("LINSERT", "l", "BEFORE", "nope", "q") == -1
    assert raw.cmd("LINSERT", "nokey", "BEFORE", "a", "q") == 0
    assert raw.cmd("EXISTS", "nokey") == 0
    assert raw.cmd("LINSERT", "l", "MIDDLE", "a", "q") == SYNTAX
    assert raw.cmd("LINSERT", "l", "BEFORE", "a") == arity("linsert")
    assert raw.cmd("LLEN", "l") == 6


def test_lrem(raw):
    raw.cmd("RPUSH", "l", *"abacadaa")
    assert raw.cmd("LREM", "l", "2", "a") == 2  # from the head
    assert lrange(raw, "l") == [b"b", b"c", b"a", b"d", b"a", b"a"]
    assert raw.cmd("LREM", "l", "-2", "a") == 2  # from the tail
    assert lrange(raw, "l") == [b"b", b"c", b"a", b"d"]
    assert raw.cmd("LREM", "l", "0", "a") == 1  # all
    assert raw.cmd("LREM", "l", "0", "zz") == 0
    assert raw.cmd("LREM", "l", "100", "b") == 1
    assert lrange(raw, "l") == [b"c", b"d"]
    assert raw.cmd("LREM", "nokey", "0", "a") == 0
    assert raw.cmd("LREM", "l", "x", "a") == NOT_INT
    assert raw.cmd("LREM", "l", "0") == arity("lrem")
    assert raw.cmd("LREM", "l", "0", "c") == 1
    assert raw.cmd("LREM", "l", "-1", "d") == 1
    assert raw.cmd("EXISTS", "l") == 0


def test_ltrim(raw):
    raw.cmd("RPUSH", "l", *"abcdef")
    assert raw.cmd("LTRIM", "l", "1", "-2") == "OK"
    assert lrange(raw, "l") == [b"b", b"c", b"d", b"e"]
    assert raw.cmd("LTRIM", "l", "-3", "100") == "OK"
    assert lrange(raw, "l") == [b"c", b"d", b"e"]
    assert raw.cmd("LTRIM", "l", "0", "0") == "OK"
    assert lrange(raw, "l") == [b"c"]
    # an empty range deletes the key
    assert raw.cmd("LTRIM", "l", "5", "1") == "OK"
    assert raw.cmd("EXISTS", "l") == 0
    raw.cmd("RPUSH", "l", *"abc")
    assert raw.cmd("LTRIM", "l", "2", "1") == "OK"
    assert raw.cmd("EXISTS", "l") == 0
    assert raw.cmd("LTRIM", "nokey", "0", "1") == "OK"
    assert raw.cmd("EXISTS", "nokey") == 0
    raw.cmd("RPUSH", "l", *"abc")
    assert raw.cmd("LTRIM", "l", "-100", "100") == "OK"
    assert lrange(raw, "l") == [b"a", b"b", b"c"]
    assert raw.cmd("LTRIM", "l", "x", "1") == NOT_INT
    assert raw.cmd("LTRIM", "l", "0") == arity("ltrim")


# -- LPOS ---------------------------------------------------------------------

def test_lpos(raw):
    raw.cmd("RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c")
    assert raw.cmd("LPOS", "l", "c") == 2
    assert raw.cmd("LPOS", "l", "a") == 0
    assert raw.cmd("LPOS", "l", "zz") is None
    assert raw.cmd("LPOS", "nokey", "a") is None
    assert raw.cmd("LPOS", "l", "c", "RANK", "1") == 2
    assert raw.cmd("LPOS", "l", "c", "RANK", "2") == 6
    assert raw.cmd("LPOS", "l", "c", "RANK", "-1") == 7
    assert raw.cmd("LPOS", "l", "c", "RANK", "-3") == 2
    assert raw.cmd("LPOS", "l", "c", "RANK", "4") is None
    assert raw.cmd("LPOS", "l", "c", "RANK", "-4") is None


def test_lpos_count_maxlen(raw):
    raw.cmd("RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c")
    assert raw.cmd("LPOS", "l", "c", "COUNT", "2") == [2, 6]
    assert raw.cmd("LPOS", "l", "c", "COUNT", "0") == [2, 6, 7]  # 0: every match
    assert raw.cmd("LPOS", "l", "c", "COUNT", "100") == [2, 6, 7]
    assert raw.cmd("LPOS", "l", "c", "COUNT", "1") == [2]
    assert raw.cmd("LPOS", "l", "c", "RANK", "2", "COUNT", "0") == [6, 7]
    assert raw.cmd("LPOS", "l", "c", "RANK", "-1", "COUNT", "2") == [7, 6]
    assert raw.cmd("LPOS", "l", "c", "COUNT", "0", "RANK", "-1") == [7, 6, 2]
    assert raw.cmd("LPOS", "l", "zz", "COUNT", "0") == []
    assert raw_reply(raw, "LPOS", "nokey", "a", "COUNT", "0") == b"*0\r\n"
    # MAXLEN: compare only that many elements (from the end with a negative RANK)
    assert raw.cmd("LPOS", "l", "c", "MAXLEN", "2") is None
    assert raw.cmd("LPOS", "l", "c", "MAXLEN", "3") == 2
    assert raw.cmd("LPOS", "l", "c", "COUNT", "0", "MAXLEN", "7") == [2, 6]
    assert raw.cmd("LPOS", "l", "c", "COUNT", "0", "MAXLEN", "0") == [2, 6, 7]  # 0: no limit
    assert raw.cmd("LPOS", "l", "c", "RANK", "-1", "COUNT", "0", "MAXLEN", "2") == [7, 6]
    assert raw.cmd("LPOS", "l", "a", "RANK", "-1", "MAXLEN", "7") is None


def test_lpos_errors(raw):
    raw.cmd("RPUSH", "l", "a")
    assert raw.cmd("LPOS", "l", "a", "RANK", "0") == Err(
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the "
        "second ... or use negative to start from the end of the list")
    assert raw.cmd("LPOS", "l", "a", "COUNT", "-1") == Err("ERR COUNT can't be negative")
    assert raw.cmd("LPOS", "l", "a", "MAXLEN", "-1") == Err("ERR MAXLEN can't be negative")
    assert raw.cmd("LPOS", "l", "a", "RANK", "x") == NOT_INT
    assert raw.cmd("LPOS", "l", "a", "FOO") == SYNTAX
    assert raw.cmd("LPOS", "l", "a", "RANK") == SYNTAX
    assert raw.cmd("LPOS", "l", "a", "COUNT") == SYNTAX
    assert raw.cmd("LPOS", "l") == arity("lpos")


def test_lpos_redis_py(r):
    r.rpush("l", "a", "b", "c", "b")
    assert r.lpos("l", "b") == 1
    assert r.lpos("l", "b", rank=-1) == 3
    assert r.lpos("l", "b", count=0) == [1, 3]
    assert r.lpos("l", "b", count=0, maxlen=2) == [1]
    assert r.lpos("l", "zz") is None


# -- LMOVE RPOPLPUSH -----------------------------------------------------------

@pytest.mark.parametrize("wherefrom,whereto,moved,src,dst", [
    ("LEFT", "LEFT", b"a", [b"b", b"c"], [b"a", b"x", b"y"]),
    ("LEFT", "RIGHT", b"a", [b"b", b"c"], [b"x", b"y", b"a"]),
    ("RIGHT", "LEFT", b"c", [b"a", b"b"], [b"c", b"x", b"y"]),
    ("RIGHT", "RIGHT", b"c", [b"a", b"b"], [b"x", b"y", b"c"]),
])
def test_lmove_directions(raw, wherefrom, whereto, moved, src, dst):
    raw.cmd("RPUSH", "src", "a", "b", "c")
    raw.cmd("RPUSH", "dst", "x", "y")
    assert raw.cmd("LMOVE", "src", "dst", wherefrom, whereto) == moved
    assert lrange(raw, "src") == src
    assert lrange(raw, "dst") == dst


def test_lmove_creates_destination_and_deletes_empty_source(raw):
    raw.cmd("RPUSH", "src", "only")
    assert raw.cmd("LMOVE", "src", "dst", "left", "right") == b"only"
    assert raw.cmd("EXISTS", "src") == 0
    assert lrange(raw, "dst") == [b"only"]
    assert raw.cmd("LMOVE", "src", "dst", "LEFT", "RIGHT") is None
    assert raw.cmd("EXISTS", "src") == 0
    assert lrange(raw, "dst") == [b"only"]


def test_lmove_same_list_rotates(raw):
    raw.cmd("RPUSH", "l", "a", "b", "c")
    assert raw.cmd("LMOVE", "l", "l", "LEFT", "RIGHT") == b"a"
    assert lrange(raw, "l") == [b"b", b"c", b"a"]
    assert raw.cmd("LMOVE", "l", "l", "RIGHT", "LEFT") == b"a"
    assert lrange(raw, "l") == [b"a", b"b", b"c"]
    assert raw.cmd("LMOVE", "l", "l", "LEFT", "LEFT") == b"a"
    assert lrange(raw, "l") == [b"a", b"b", b"c"]
    raw.cmd("DEL", "l")
    raw.cmd("RPUSH", "l", "x")
    assert raw.cmd("LMOVE", "l", "l", "RIGHT", "RIGHT") == b"x"
    assert lrange(raw, "l") == [b"x"]


def test_lmove_errors(raw):
    raw.cmd("RPUSH", "l", "a")
    raw.cmd("SET", "s", "v")
    assert raw.cmd("LMOVE", "l", "d", "UP", "LEFT") == SYNTAX
    assert raw.cmd("LMOVE", "l", "d", "LEFT", "DOWN") == SYNTAX
    assert raw.cmd("LMOVE", "l", "d", "LEFT") == arity("lmove")
    assert raw.cmd("LMOVE", "l", "s", "LEFT", "RIGHT") == WRONGTYPE
    assert raw.cmd("LMOVE", "s", "l", "LEFT", "RIGHT") == WRONGTYPE
    # nothing moved on an error
    assert lrange(raw, "l") == [b"a"]
    assert raw.cmd("GET", "s") == b"v"
    # a missing source replies nil before the destination's type is looked at
    assert raw.cmd("LMOVE", "nokey", "s", "LEFT", "RIGHT") is None


def test_rpoplpush(raw):
    raw.cmd("RPUSH", "src", "a", "b", "c")
    assert raw.cmd("RPOPLPUSH", "src", "dst") == b"c"
    assert raw.cmd("RPOPLPUSH", "src", "dst") == b"b"
    assert lrange(raw, "dst") == [b"b", b"c"]
    assert raw.cmd("RPOPLPUSH", "src", "src") == b"a"
    assert raw.cmd("RPOPLPUSH", "src", "dst") == b"a"
    assert raw.cmd("EXISTS", "src") == 0
    assert raw.cmd("RPOPLPUSH", "src", "dst") is None
    assert lrange(raw, "dst") == [b"a", b"b", b"c"]
    raw.cmd("SET", "s", "v")
    assert raw.cmd("RPOPLPUSH", "dst", "s") == WRONGTYPE
    assert raw.cmd("RPOPLPUSH", "s", "dst") == WRONGTYPE
    assert raw.cmd("LLEN", "dst") == 3
    assert raw.cmd("RPOPLPUSH", "dst") == arity("rpoplpush")


def test_lmove_redis_py(r):
    r.rpush("a", "1", "2")
    assert r.lmove("a", "b") == "1"  # LEFT RIGHT by default
    assert r.lmove("a", "b", "RIGHT", "LEFT") == "2"
    assert r.lrange("b", 0, -1) == ["2", "1"]
    assert r.exists("a") == 0
    assert r.rpoplpush("b", "a") == "1"


# -- LMPOP ------------------------------------------------------------------------

def test_lmpop(raw):
    raw.cmd("RPUSH", "l2", "a", "b", "c", "d")
    assert raw.cmd("LMPOP", "2", "l1", "l2", "LEFT") == [b"l2", [b"a"]]
    assert raw.cmd("LMPOP", "2", "l1", "l2", "RIGHT", "COUNT", "2") == [b"l2", [b"d", b"c"]]
    raw.cmd("RPUSH", "l1", "x")
    # the first non-empty key in argument order
    assert raw.cmd("LMPOP", "2", "l1", "l2", "left", "count", "10") == [b"l1", [b"x"]]
    assert raw.cmd("EXISTS", "l1") == 0
    assert raw.cmd("LMPOP", "1", "l2", "LEFT", "COUNT", "10") == [b"l2", [b"b"]]
    assert raw.cmd("EXISTS", "l2") == 0
    assert raw_reply(raw, "LMPOP", "2", "l1", "l2", "LEFT") == b"*-1\r\n"


def test_lmpop_same_key_twice(raw):
    raw.cmd("RPUSH", "l", "a", "b")
    assert raw.cmd("LMPOP", "2", "l", "l", "RIGHT", "COUNT", "5") == [b"l", [b"b", b"a"]]
    assert raw.cmd("EXISTS", "l") == 0
    raw.cmd("RPUSH", "l", "a", "b")
    assert raw.cmd("LMPOP", "1", "l", "LEFT", "COUNT", "9223372036854775807") == [
        b"l", [b"a", b"b"]]
    assert raw.cmd("EXISTS", "l") == 0


def test_lmpop_errors(raw):
    raw.cmd("RPUSH", "l", "a")
    raw.cmd("SET", "s", "v")
    numkeys = Err("ERR numkeys should be greater than 0")
    count = Err("ERR count should be greater than 0")
    assert raw.cmd("LMPOP", "0", "LEFT", "l") == numkeys
    assert raw.cmd("LMPOP", "-1", "l", "LEFT") == numkeys
    assert raw.cmd("LMPOP", "x", "l", "LEFT") == numkeys
    assert raw.cmd("LMPOP", "1", "l", "MIDDLE") == SYNTAX
    assert raw.cmd("LMPOP", "2", "l", "LEFT") == SYNTAX  # numkeys past the arguments
    assert raw.cmd("LMPOP", "1", "l", "LEFT", "COUNT", "0") == count
    assert raw.cmd("LMPOP", "1", "l", "LEFT", "COUNT", "-1") == count
    assert raw.cmd("LMPOP", "1", "l", "LEFT", "COUNT", "x") == count
    assert raw.cmd("LMPOP", "1", "l", "LEFT", "COUNT") == SYNTAX
    assert raw.cmd("LMPOP", "1", "l", "LEFT", "COUNT", "1", "COUNT", "2") == SYNTAX
    assert raw.cmd("LMPOP", "1", "l", "LEFT", "FOO") == SYNTAX
    assert raw.cmd("LMPOP", "1", "l") == arity("lmpop")
    # a key of another type before the list is an error, not skipped
    assert raw.cmd("LMPOP", "2", "s", "l", "LEFT") == WRONGTYPE
    assert raw.cmd("LMPOP", "2", "nokey", "s", "LEFT") == WRONGTYPE
    assert lrange(raw, "l") == [b"a"]


def test_lmpop_redis_py(r):
    r.rpush("b", "1", "2", "3")
    assert r.lmpop(2, "a", "b", direction="RIGHT", count=2) == ["b", ["3", "2"]]
    assert r.lmpop(1, "a", direction="LEFT") is None


# -- types, encodings, empty keys ---------------------------------------------------

@pytest.mark.parametrize("args", [
    ["LPUSH", "s", "a"], ["RPUSH", "s", "a"], ["LPUSHX", "s", "a"], ["RPUSHX", "s", "a"],
    ["LPOP", "s"], ["RPOP", "s"], ["LPOP", "s", "2"], ["RPOP", "s", "0"], ["LLEN", "s"],
    ["LRANGE", "s", "0", "-1"], ["LINDEX", "s", "0"], ["LSET", "s", "0", "x"],
    ["LINSERT", "s", "BEFORE", "a", "b"], ["LREM", "s", "0", "a"], ["LTRIM", "s", "0", "1"],
    ["LPOS", "s", "a"], ["LMOVE", "s", "d", "LEFT", "LEFT"], ["RPOPLPUSH", "s", "d"],
    ["LMPOP", "1", "s", "LEFT"],
])
def test_wrongtype(raw, args):
    raw.cmd("SET", "s", "v")
    assert raw.cmd(*args) == WRONGTYPE
    assert raw.cmd("GET", "s") == b"v"
    assert raw.cmd("EXISTS", "d") == 0


def test_list_commands_on_other_collection_types(raw):
    raw.cmd("HSET", "h", "f", "v")
    raw.cmd("SADD", "set", "m")
    raw.cmd("ZADD", "z", "1", "m")
    for key in ("h", "set", "z"):
        assert raw.cmd("LPUSH", key, "a") == WRONGTYPE
        assert raw.cmd("LLEN", key) == WRONGTYPE
    raw.cmd("RPUSH", "l", "a")
    assert raw.cmd("GET", "l") == WRONGTYPE
    assert raw.cmd("HSET", "l", "f", "v") == WRONGTYPE
    assert raw.cmd("SADD", "l", "m") == WRONGTYPE


def test_string_commands_overwrite_lists(raw):
    raw.cmd("RPUSH", "l", "a")
    assert raw.cmd("SET", "l", "v") == "OK"
    assert raw.cmd("TYPE", "l") == "string"
    assert raw.cmd("RPUSH", "l", "a") == WRONGTYPE


def test_list_keeps_ttl_and_del(raw):
    raw.cmd("RPUSH", "l", "a", "b")
    raw.cmd("EXPIRE", "l", "100")
    raw.cmd("RPUSH", "l", "c")
    raw.cmd("LPOP", "l")
    assert 0 < raw.cmd("TTL", "l") <= 100
    assert raw.cmd("DEL", "l") == 1
    assert raw.cmd("LLEN", "l") == 0
    # a list emptied and pushed again is new: no TTL
    raw.cmd("RPUSH", "l", "a")
    raw.cmd("EXPIRE", "l", "100")
    raw.cmd("LPOP", "l")
    raw.cmd("RPUSH", "l", "b")
    assert raw.cmd("TTL", "l") == -1


def test_object_encoding_list(raw):
    raw.cmd("RPUSH", "l", "a")
    assert raw.cmd("OBJECT", "ENCODING", "l") == b"quicklist"
    raw.cmd("RPUSH", "big", *[str(i) for i in range(1000)])
    assert raw.cmd("OBJECT", "ENCODING", "big") == b"quicklist"


def test_list_in_other_db(raw):
    raw.cmd("RPUSH", "l", "db0")
    raw.cmd("SELECT", "3")
    assert raw.cmd("LLEN", "l") == 0
    raw.cmd("RPUSH", "l", "db3")
    raw.cmd("SELECT", "0")
    assert lrange(raw, "l") == [b"db0"]
