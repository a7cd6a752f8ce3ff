"""Sorted-set commands end to end (ZADD with NX XX GT LT CH INCR, ZINCRBY ZREM
ZCARD ZCOUNT ZLEXCOUNT ZSCORE ZMSCORE ZRANK ZREVRANK, ZRANGE with BYSCORE BYLEX
REV LIMIT, ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE
ZRANGESTORE, ZREMRANGEBYRANK/BYSCORE/BYLEX, ZPOPMIN ZPOPMAX ZMPOP ZRANDMEMBER,
ZUNION ZINTER ZDIFF and their STORE forms with WEIGHTS and AGGREGATE,
ZINTERCARD ZSCAN), each reply and error string as redis-server 7.0 sends it.

Scores are checked byte for byte: Redis 7.0 prints a score with "%.17g"
(0.3 -> 0.29999999999999999, 1e300 -> 1.0000000000000001e+300), not as the
shortest text that reads back the same."""

import random

import pytest

from shoaltest import Err, Map, encode

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = Err("ERR value is not an integer or out of range")
SYNTAX = Err("ERR syntax error")
NOT_FLOAT = Err("ERR value is not a valid float")
MINMAX_FLOAT = Err("ERR min or max is not a float")
MINMAX_LEX = Err("ERR min or max not valid string range item")
MUST_BE_POSITIVE = Err("ERR value is out of range, must be positive")
NAN_SCORE = Err("ERR resulting score is not a number (NaN)")
LIMIT_ONLY = Err("ERR syntax error, LIMIT is only supported in combination with either "
                 "BYSCORE or BYLEX")
BYLEX_WITHSCORES = Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")


def arity(cmd):
    return Err(f"ERR wrong number of arguments for '{cmd}' command")


def raw_reply(c, *args):
    c.send(encode(*args))
    return c.reply_bytes()


def bs(*xs):
    return [x.encode() for x in xs]


@pytest.fixture
def z5(raw):
    raw.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
    return raw


# -- ZADD ---------------------------------------------------------------------

def test_zadd_basic(raw):
    assert raw.cmd("ZADD", "z", "1", "a") == 1
    assert raw.cmd("ZADD", "z", "2", "b", "3", "c") == 2
    assert raw.cmd("ZADD", "z", "10", "a", "4", "d") == 1  # an update adds nothing
    assert raw.cmd("ZCARD", "z") == 4
    assert raw.cmd("TYPE", "z") == "zset"
    assert raw.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES") == bs(
        "b", "2", "c", "3", "d", "4", "a", "10")
    # the same member twice in one call: the last score wins, counted once
    assert raw.cmd("ZADD", "z", "5", "x", "6", "x") == 1
    assert raw.cmd("ZSCORE", "z", "x") == b"6"


def test_zadd_nx_xx(raw):
    raw.cmd("ZADD", "z", "1", "a")
    assert raw.cmd("ZADD", "z", "NX", "5", "a", "2", "b") == 1
    assert raw.cmd("ZSCORE", "z", "a") == b"1"
    assert raw.cmd("ZSCORE", "z", "b") == b"2"
    assert raw.cmd("ZADD", "z", "XX", "7", "a", "3", "c") == 0
    assert raw.cmd("ZSCORE", "z", "a") == b"7"
    assert raw.cmd("ZSCORE", "z", "c") is None
    assert raw.cmd("ZADD", "nokey", "XX", "1", "a") == 0
    assert raw.cmd("EXISTS", "nokey") == 0
    assert raw.cmd("ZADD", "z", "nx", "ch", "1", "q") == 1  # options in lower case


def test_zadd_gt_lt(raw):
    raw.cmd("ZADD", "z", "5", "a")
    assert raw.cmd("ZADD", "z", "GT", "3", "a") == 0
    assert raw.cmd("ZSCORE", "z", "a") == b"5"
    assert raw.cmd("ZADD", "z", "GT", "7", "a") == 0
    assert raw.cmd("ZSCORE", "z", "a") == b"7"
    assert raw.cmd("ZADD", "z", "LT", "9", "a") == 0
    assert raw.cmd("ZSCORE", "z", "a") == b"7"
    assert raw.cmd("ZADD", "z", "LT", "1", "a") == 0
    assert raw.cmd("ZSCORE", "z", "a") == b"1"
    # GT and LT still add new members
    assert raw.cmd("ZADD", "z", "GT", "1", "new1") == 1
    assert raw.cmd("ZADD", "z", "LT", "1", "new2") == 1
    # ... unless XX says not to
    assert raw.cmd("ZADD", "z", "XX", "GT", "1", "new3") == 0
    assert raw.cmd("ZSCORE", "z", "new3") is None
    assert raw.cmd("ZADD", "z", "XX", "GT", "100", "a") == 0
    assert raw.cmd("ZSCORE", "z", "a") == b"100"


def test_zadd_ch(raw):
    raw.cmd("ZADD", "z", "1", "a", "2", "b")
    assert raw.cmd("ZADD", "z", "CH", "1", "a", "3", "b", "4", "c") == 2  # b changed, c added
    assert raw.cmd("ZADD", "z", "CH", "1", "a") == 0
    assert raw.cmd("ZADD", "z", "GT", "CH", "0", "a") == 0
    assert raw.cmd("ZADD", "z", "GT", "CH", "5", "a") == 1
    assert raw.cmd("ZADD", "z", "LT", "CH", "9", "a") == 0
    assert raw.cmd("ZADD", "z", "LT", "CH", "2", "a") == 1
    assert raw.cmd("ZADD", "z", "XX", "CH", "7", "b", "8", "c", "9", "d") == 2
    assert raw.cmd("ZADD", "z", "NX", "CH", "7", "b", "9", "d") == 1
    assert raw.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES") == bs(
        "a", "2", "b", "7", "c", "8", "d", "9")


def test_zadd_incr(raw):
    assert raw.cmd("ZADD", "z", "INCR", "2.5", "a") == b"2.5"
    assert raw.cmd("ZADD", "z", "INCR", "1", "a") == b"3.5"
    assert raw.cmd("ZADD", "z", "CH", "INCR", "1", "a") == b"4.5"
    # a condition that blocks the update replies nil
    assert raw_reply(raw, "ZADD", "z", "INCR", "NX", "1", "a") == b"$-1\r\n"
    assert raw_reply(raw, "ZADD", "z", "INCR", "XX", "1", "nomember") == b"$-1\r\n"
    assert raw_reply(raw, "ZADD", "z", "GT", "INCR", "-1", "a") == b"$-1\r\n"
    assert raw.cmd("ZADD", "z", "LT", "INCR", "-1", "a") == b"3.5"
    assert raw.cmd("ZADD", "z", "GT", "INCR", "10", "a") == b"13.5"
    assert raw.cmd("ZADD", "z", "XX", "INCR", "0.5", "a") == b"14"
    assert raw.cmd("ZADD", "z", "NX", "INCR", "3", "b") == b"3"
    assert raw.cmd("ZSCORE", "z", "nomember") is None
    assert raw.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES") == bs("b", "3", "a", "14")


def test_zadd_incr_nan(raw):
    raw.cmd("ZADD", "z", "inf", "i")
    assert raw.cmd("ZADD", "z", "INCR", "-inf", "i") == NAN_SCORE
    assert raw.cmd("ZINCRBY", "z", "-inf", "i") == NAN_SCORE
    assert raw.cmd("ZSCORE", "z", "i") == b"inf"
    assert raw.cmd("ZADD", "z", "INCR", "inf", "i") == b"inf"


@pytest.mark.parametrize("opts,err", [
    (["NX", "XX"], "ERR XX and NX options at the same time are not compatible"),
    (["XX", "NX"], "ERR XX and NX options at the same time are not compatible"),
    (["NX", "XX", "GT"], "ERR XX and NX options at the same time are not compatible"),
    (["NX", "GT"], "ERR GT, LT, and/or NX options at the same time are not compatible"),
    (["NX", "LT"], "ERR GT, LT, and/or NX options at the same time are not compatible"),
    (["GT", "LT"], "ERR GT, LT, and/or NX options at the same time are not compatible"),
    (["LT", "GT", "CH"], "ERR GT, LT, and/or NX options at the same time are not compatible"),
    (["INCR", "GT", "LT"], "ERR GT, LT, and/or NX options at the same time are not compatible"),
])
def test_zadd_incompatible_options(raw, opts, err):
    assert raw.cmd("ZADD", "z", *opts, "1", "a") == Err(err)
    assert raw.cmd("EXISTS", "z") == 0


def test_zadd_syntax_and_score_errors(raw):
    assert raw.cmd("ZADD", "z", "INCR", "1", "a", "2", "b") == Err(
        "ERR INCR option supports a single increment-element pair")
    assert raw.cmd("ZADD", "z", "1", "a", "2") == SYNTAX
    assert raw.cmd("ZADD", "z", "1", "a", "NX") == SYNTAX  # options come first
    assert raw.cmd("ZADD", "z", "FOO", "1", "a") == SYNTAX
    assert raw.cmd("ZADD", "z", "INCR", "1") == SYNTAX
    for bad in ("x", "nan", "NaN", "", " 1", "1 ", "1e400", "1.5.5", "--1"):
        assert raw.cmd("ZADD", "z", bad, "a") == NOT_FLOAT, bad
    # one bad score: nothing is added
    assert raw.cmd("ZADD", "z", "1", "a", "x", "b") == NOT_FLOAT
    assert raw.cmd("EXISTS", "z") == 0
    raw.cmd("ZADD", "z", "1", "a")
    assert raw.cmd("ZADD", "z", "5", "a", "nan", "b") == NOT_FLOAT
    assert raw.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES") == bs("a", "1")
    for args in ([], ["1"], ["NX"], ["CH"], ["INCR"]):
        assert raw.cmd("ZADD", "z", *args) == arity("zadd")


def test_zadd_redis_py(r):
    assert r.zadd("z", {"a": 1, "b": 2.5}) == 2
    assert r.zadd("z", {"a": 5}, gt=True, ch=True) == 1
    assert r.zadd("z", {"a": 1}, incr=True) == 6.0
    assert r.zadd("z", {"c": 1}, xx=True) == 0
    assert r.zadd("z", {"c": 1}, nx=True) == 1
    assert r.zrange("z", 0, -1, withscores=True) == [("c", 1.0), ("b", 2.5), ("a", 6.0)]
    with pytest.raises(Exception):
        r.zadd("z", {"a": 1}, nx=True, xx=True)


# -- ZINCRBY ZREM ZCARD ZSCORE ZMSCORE ---------------------------------------------

def test_zincrby(raw):
    assert raw.cmd("ZINCRBY", "z", "1.5", "m") == b"1.5"  # creates the key
    assert raw.cmd("ZINCRBY", "z", "-3", "m") == b"-1.5"
    assert raw.cmd("ZINCRBY", "z", "0", "m") == b"-1.5"
    assert raw.cmd("ZINCRBY", "z", "10", "n") == b"10"
    assert raw.cmd("ZRANGE", "z", "0", "-1") == bs("m", "n")
    assert raw.cmd("ZINCRBY", "z", "x", "m") == NOT_FLOAT
    assert raw.cmd("ZINCRBY", "z", "nan", "m") == NOT_FLOAT
    assert raw.cmd("ZINCRBY", "new", "x", "m") == NOT_FLOAT
    assert raw.cmd("EXISTS", "new") == 0
    assert raw.cmd("ZINCRBY", "z", "1") == arity("zincrby")


def test_zincrby_redis_py(r):
    assert r.zincrby("z", 2, "a") == 2.0
    assert r.zincrby("z", -0.5, "a") == 1.5


def test_zrem(raw):
    raw.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert raw.cmd("ZREM", "z", "a", "a", "nomember") == 1
    assert raw.cmd("ZREM", "z", "a") == 0
    assert raw.cmd("ZREM", "nokey", "a") == 0
    assert raw.cmd("ZCARD", "z") == 2
    assert raw.cmd("ZREM", "z", "b", "c") == 2
    assert raw.cmd("EXISTS", "z") == 0  # emptied: gone
    assert raw.cmd("ZREM", "z") == arity("zrem")


def test_zcard_zscore_zmscore(raw):
    assert raw.cmd("ZCARD", "z") == 0
    raw.cmd("ZADD", "z", "1", "a", "2.5", "b")
    assert raw.cmd("ZCARD", "z") == 2
    assert raw.cmd("ZSCORE", "z", "b") == b"2.5"
    assert raw.cmd("ZSCORE", "z", "nomember") is None
    assert raw.cmd("ZSCORE", "nokey", "a") is None
    assert raw.cmd("ZMSCORE", "z", "a", "nomember", "b") == [b"1", None, b"2.5"]
    assert raw_reply(raw, "ZMSCORE", "nokey", "a") == b"*1\r\n$-1\r\n"
    assert raw.cmd("ZCARD") == arity("zcard")
    assert raw.cmd("ZSCORE", "z") == arity("zscore")
    assert raw.cmd("ZMSCORE", "z") == arity("zmscore")


# -- score formatting ---------------------------------------------------------------

SCORES = [
    ("1.5", b"1.5"),
    ("3.0", b"3"),
    ("-12", b"-12"),
    ("0", b"0"),
    ("1e300", b"1.0000000000000001e+300"),
    ("-inf", b"-inf"),
    ("inf", b"inf"),
    ("+inf", b"inf"),
    ("-INF", b"-inf"),
    ("123456789012345678", b"1.2345678901234568e+17"),
    ("12345678901234567890", b"1.2345678901234567e+19"),
    ("0.3", b"0.29999999999999999"),
    ("1e15", b"1000000000000000"),
    ("1e16", b"10000000000000000"),
    ("1e17", b"1e+17"),
    ("1e-10", b"1e-10"),
    ("0.0001", b"0.0001"),
    ("2.5e-5", b"2.5000000000000001e-05"),
    ("-1.5e-7", b"-1.4999999999999999e-07"),
    ("1234567.125", b"1234567.125"),
    ("1.7976931348623157e308", b"1.7976931348623157e+308"),
]


@pytest.mark.parametrize("size", ["listpack", "skiplist"])
@pytest.mark.parametrize("score,text", SCORES)
def test_score_formatting(raw, size, score, text):
    if size == "skiplist":
        raw.cmd("ZADD", "z", *[x for i in range(200) for x in (str(i), f"filler{i}")])
    assert raw.cmd("ZADD", "z", score, "m") == 1
    assert raw_reply(raw, "ZSCORE", "z", "m") == b"$%d\r\n%s\r\n" % (len(text), text)
    assert raw.cmd("ZMSCORE", "z", "m") == [text]
    rank = raw.cmd("ZRANK", "z", "m")
    assert raw.cmd("ZRANGE", "z", rank, rank, "WITHSCORES") == [b"m", text]
    assert raw.cmd("ZINCRBY", "z", "0", "m") == text
    assert raw.cmd("ZADD", "z", "INCR", "0", "m") == text
    assert raw.cmd("ZUNION", "1", "z", "WITHSCORES")[2 * rank + 1] == text
    flat = []
    cursor = b"0"
    while True:
        cursor, batch = raw.cmd("ZSCAN", "z", cursor, "MATCH", "m")
        flat += batch
        if cursor == b"0":
            break
    assert flat[0] == b"m"
    if size == "skiplist":
        assert flat[1] == text
    else:
        # a listpack keeps a whole score as an integer, and ZSCAN sends that
        # text: 1e17 comes back as 100000000000000000 (ZSCORE says 1e+17)
        assert float(flat[1]) == float(text)
    assert raw.cmd("ZPOPMIN", "z", "1000")[2 * rank:2 * rank + 2] == [b"m", text]


@pytest.mark.parametrize("score,text", SCORES)
def test_score_formatting_resp3(raw, score, text):
    assert isinstance(raw.cmd("HELLO", "3"), Map)
    raw.cmd("ZADD", "z", score, "m")
    assert raw_reply(raw, "ZSCORE", "z", "m") == b"," + text + b"\r\n"
    assert raw_reply(raw, "ZINCRBY", "z", "0", "m") == b"," + text + b"\r\n"
    assert raw_reply(raw, "ZRANGE", "z", "0", "-1", "WITHSCORES") == (
        b"*1\r\n*2\r\n$1\r\nm\r\n," + text + b"\r\n")


def test_zincrby_float_sums(raw):
    raw.cmd("ZADD", "z", "0.1", "p")
    assert raw.cmd("ZINCRBY", "z", "0.2", "p") == b"0.30000000000000004"
    assert raw.cmd("ZSCORE", "z", "p") == b"0.30000000000000004"
    assert raw.cmd("ZINCRBY", "z", "1e300", "q") == b"1.0000000000000001e+300"
    assert raw.cmd("ZINCRBY", "z", "1", "r") == b"1"
    assert raw.cmd("ZINCRBY", "z", "2.0", "r") == b"3"
    assert raw.cmd("ZINCRBY", "z", "123456789012345677", "r") == b"1.2345678901234568e+17"
    assert raw.cmd("ZINCRBY", "z", "-inf", "s") == b"-inf"
    assert raw.cmd("ZINCRBY", "z", "-1", "s") == b"-inf"


def test_scores_redis_py(r):
    r.zadd("z", {"a": 0.3, "b": 1e300, "c": float("-inf"), "d": 3.0})
    assert r.zscore("z", "a") == 0.3
    assert r.zscore("z", "b") == 1e300
    assert r.zscore("z", "c") == float("-inf")
    assert r.zmscore("z", ["d", "x"]) == [3.0, None]
    assert r.zrange("z", 0, -1, withscores=True) == [
        ("c", float("-inf")), ("a", 0.3), ("d", 3.0), ("b", 1e300)]


# -- order ----------------------------------------------------------------------

def test_equal_scores_order_by_member_bytes(raw):
    raw.cmd("ZADD", "z", "1", "b", "1", "a", "1", "B", "1", "aa", "1", "", "0", "z",
            "1", b"\xff", "1", b"\x00")
    assert raw.cmd("ZRANGE", "z", "0", "-1") == [
        b"z", b"", b"\x00", b"B", b"a", b"aa", b"b", b"\xff"]
    assert raw.cmd("ZRANGE", "z", "0", "-1", "REV") == [
        b"\xff", b"b", b"aa", b"a", b"B", b"\x00", b"", b"z"]
    assert raw.cmd("ZRANK", "z", "aa") == 5
    assert raw.cmd("ZREVRANK", "z", "aa") == 2


def test_negative_and_infinite_scores_order(raw):
    raw.cmd("ZADD", "z", "inf", "top", "-inf", "bottom", "-1e308", "low", "0", "zero",
            "-0.5", "neg", "1e308", "high")
    assert raw.cmd("ZRANGE", "z", "0", "-1") == bs("bottom", "low", "neg", "zero", "high", "top")


# -- ZRANK ZREVRANK ZCOUNT ZLEXCOUNT -------------------------------------------------

def test_zrank_zrevrank(z5):
    raw = z5
    assert raw.cmd("ZRANK", "z", "a") == 0
    assert raw.cmd("ZRANK", "z", "e") == 4
    assert raw.cmd("ZREVRANK", "z", "a") == 4
    assert raw.cmd("ZREVRANK", "z", "e") == 0
    assert raw_reply(raw, "ZRANK", "z", "nomember") == b"$-1\r\n"
    assert raw_reply(raw, "ZREVRANK", "nokey", "a") == b"$-1\r\n"
    # WITHSCORE came in Redis 7.2
    assert raw.cmd("ZRANK", "z", "a", "WITHSCORE") == arity("zrank")
    assert raw.cmd("ZREVRANK", "z") == arity("zrevrank")


@pytest.mark.parametrize("lo,hi,n", [
    ("-inf", "+inf", 5), ("1", "5", 5), ("(1", "5", 4), ("(1", "(5", 3), ("2", "2", 1),
    ("(2", "2", 0), ("3", "1", 0), ("-inf", "(-inf", 0), ("(inf", "+inf", 0), ("2.5", "inf", 3),
    ("-100", "1.0", 1), ("5", "+inf", 1), ("-inf", "-inf", 0), ("1e-300", "1", 1),
])
def test_zcount(z5, lo, hi, n):
    assert z5.cmd("ZCOUNT", "z", lo, hi) == n


def test_zcount_errors(z5):
    raw = z5
    for lo, hi in [("x", "1"), ("1", "x"), ("(x", "1"), ("[1", "2"), ("nan", "1")]:
        assert raw.cmd("ZCOUNT", "z", lo, hi) == MINMAX_FLOAT, (lo, hi)
    assert raw.cmd("ZCOUNT", "nokey", "0", "1") == 0
    assert raw.cmd("ZCOUNT", "z", "0") == arity("zcount")


@pytest.fixture
def lexz(raw):
    raw.cmd("ZADD", "l", "0", "a", "0", "aa", "0", "ab", "0", "b", "0", "", "0", "c")
    return raw


@pytest.mark.parametrize("lo,hi,want", [
    ("-", "+", ["", "a", "aa", "ab", "b", "c"]),
    ("[a", "[b", ["a", "aa", "ab", "b"]),
    ("(a", "(b", ["aa", "ab"]),
    ("[a", "(aa", ["a"]),
    ("[", "(a", [""]),
    ("(", "+", ["a", "aa", "ab", "b", "c"]),
    ("[aa", "[aa", ["aa"]),
    ("(aa", "(aa", []),
    ("[b", "[a", []),
    ("+", "-", []),
    ("-", "-", []),
    ("+", "+", []),
    ("[c", "+", ["c"]),
    ("(c", "+", []),
    ("-", "[a\xff", ["", "a", "aa", "ab"]),
])
def test_zrangebylex_and_zlexcount(lexz, lo, hi, want):
    raw = lexz
    assert raw.cmd("ZRANGEBYLEX", "l", lo, hi) == bs(*want)
    assert raw.cmd("ZRANGE", "l", lo, hi, "BYLEX") == bs(*want)
    assert raw.cmd("ZLEXCOUNT", "l", lo, hi) == len(want)
    # the reverse forms take max first
    assert raw.cmd("ZREVRANGEBYLEX", "l", hi, lo) == bs(*reversed(want))
    assert raw.cmd("ZRANGE", "l", hi, lo, "BYLEX", "REV") == bs(*reversed(want))


def test_lex_errors(lexz):
    raw = lexz
    for lo, hi in [("a", "b"), ("-a", "+"), ("-", "+a"), ("a", "+"), ("-", "b"), ("", "+")]:
        assert raw.cmd("ZRANGEBYLEX", "l", lo, hi) == MINMAX_LEX, (lo, hi)
        assert raw.cmd("ZLEXCOUNT", "l", lo, hi) == MINMAX_LEX
        assert raw.cmd("ZREVRANGEBYLEX", "l", hi, lo) == MINMAX_LEX
        assert raw.cmd("ZREMRANGEBYLEX", "l", lo, hi) == MINMAX_LEX
    assert raw.cmd("ZLEXCOUNT", "nokey", "-", "+") == 0
    assert raw.cmd("ZRANGEBYLEX", "l", "[a") == arity("zrangebylex")
    assert raw.cmd("ZLEXCOUNT", "l", "-") == arity("zlexcount")
    assert raw.cmd("ZCARD", "l") == 6


def test_zrangebylex_limit(lexz):
    raw = lexz
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "1", "2") == bs("a", "aa")
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "1", "-1") == bs(
        "a", "aa", "ab", "b", "c")
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "0", "0") == []
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "10", "5") == []
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "-1", "5") == []
    assert raw.cmd("ZREVRANGEBYLEX", "l", "[c", "-", "LIMIT", "0", "2") == bs("c", "b")
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "0") == SYNTAX
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "LIMIT", "x", "1") == NOT_INT
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "FOO") == SYNTAX
    assert raw.cmd("ZRANGEBYLEX", "l", "-", "+", "WITHSCORES") == BYLEX_WITHSCORES


# -- ZRANGE by rank, ZREVRANGE ---------------------------------------------------------

def rank_range(items, start, stop):
    """Redis's reading of a start/stop rank range over `items`."""
    n = len(items)
    start, stop = int(start), int(stop)
    if start < 0:
        start = max(n + start, 0)
    if stop < 0:
        stop = n + stop
    stop = min(stop, n - 1)
    return items[start:stop + 1] if start <= stop else []


@pytest.mark.parametrize("start,stop", [
    ("0", "-1"), ("0", "0"), ("1", "3"), ("-2", "-1"), ("-100", "1"), ("2", "100"),
    ("3", "1"), ("5", "10"), ("-1", "-2"), ("-100", "-50"), ("0", "9223372036854775807"),
    ("-9223372036854775808", "9223372036854775807"), ("4", "4"), ("-5", "-5"),
])
def test_zrange_by_rank(z5, start, stop):
    raw = z5
    assert raw.cmd("ZRANGE", "z", start, stop) == bs(*rank_range("abcde", start, stop))
    assert raw.cmd("ZREVRANGE", "z", start, stop) == bs(*rank_range("edcba", start, stop))
    assert raw.cmd("ZRANGE", "z", start, stop, "REV") == bs(*rank_range("edcba", start, stop))


def test_zrange_by_rank_spot_checks(z5):
    raw = z5
    assert raw.cmd("ZRANGE", "z", "1", "3") == bs("b", "c", "d")
    assert raw.cmd("ZREVRANGE", "z", "1", "3") == bs("d", "c", "b")
    assert raw.cmd("ZRANGE", "z", "-2", "-1", "REV") == bs("b", "a")
    assert raw.cmd("ZRANGE", "z", "3", "1") == []


def test_zrange_withscores(z5):
    raw = z5
    assert raw.cmd("ZRANGE", "z", "-2", "-1", "WITHSCORES") == bs("d", "4", "e", "5")
    assert raw.cmd("ZRANGE", "z", "1", "3", "REV", "WITHSCORES") == bs("d", "4", "c", "3", "b", "2")
    assert raw.cmd("ZREVRANGE", "z", "0", "1", "WITHSCORES") == bs("e", "5", "d", "4")
    assert raw.cmd("ZRANGE", "z", "0", "0", "withscores") == bs("a", "1")
    assert raw.cmd("ZRANGE", "z", "0", "0", "WITHSCORES", "WITHSCORES") == bs("a", "1")
    assert raw_reply(raw, "ZRANGE", "nokey", "0", "-1", "WITHSCORES") == b"*0\r\n"


def test_zrange_errors(z5):
    raw = z5
    assert raw.cmd("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1") == LIMIT_ONLY
    assert raw.cmd("ZRANGE", "nokey", "0", "-1", "LIMIT", "0", "1") == LIMIT_ONLY
    assert raw.cmd("ZREVRANGE", "z", "0", "1", "LIMIT", "0", "1") == LIMIT_ONLY
    assert raw.cmd("ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES") == BYLEX_WITHSCORES
    assert raw.cmd("ZRANGE", "z", "-", "+", "BYSCORE", "BYLEX") == SYNTAX
    assert raw.cmd("ZRANGE", "z", "0", "1", "FOO") == SYNTAX
    assert raw.cmd("ZREVRANGE", "z", "0", "1", "FOO") == SYNTAX
    assert raw.cmd("ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "0") == SYNTAX
    assert raw.cmd("ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "x", "1") == NOT_INT
    assert raw.cmd("ZRANGE", "z", "0", "x") == NOT_INT
    assert raw.cmd("ZRANGE", "z", "0", "1.5") == NOT_INT
    assert raw.cmd("ZRANGE", "z", "x", "3", "BYSCORE") == MINMAX_FLOAT
    assert raw.cmd("ZRANGE", "z", "1", "x", "BYSCORE") == MINMAX_FLOAT
    assert raw.cmd("ZRANGE", "z", "1", "3", "BYLEX") == MINMAX_LEX
    assert raw.cmd("ZRANGE", "z", "0") == arity("zrange")
    assert raw.cmd("ZREVRANGE", "z", "0") == arity("zrevrange")


def test_zrange_redis_py(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zrange("z", 0, -1) == ["a", "b", "c"]
    assert r.zrange("z", 0, 0, desc=True, withscores=True) == [("c", 3.0)]
    assert r.zrange("z", "(1", "+inf", byscore=True) == ["b", "c"]
    assert r.zrange("z", "[c", "-", bylex=True, desc=True, offset=0, num=2) == ["c", "b"]
    assert r.zrevrange("z", 0, 1) == ["c", "b"]


# -- by score -------------------------------------------------------------------

@pytest.mark.parametrize("lo,hi,want", [
    ("-inf", "+inf", "abcde"), ("(1", "3", "bc"), ("(1", "(5", "bcd"), ("2", "2", "b"),
    ("(2", "(2", ""), ("5", "1", ""), ("-inf", "inf", "abcde"), ("(inf", "+inf", ""),
    ("-inf", "(-inf", ""), ("2.5", "+inf", "cde"), ("-1e308", "1", "a"),
])
def test_zrangebyscore(z5, lo, hi, want):
    raw = z5
    assert raw.cmd("ZRANGEBYSCORE", "z", lo, hi) == bs(*want)
    assert raw.cmd("ZRANGE", "z", lo, hi, "BYSCORE") == bs(*want)
    assert raw.cmd("ZREVRANGEBYSCORE", "z", hi, lo) == bs(*reversed(want))
    assert raw.cmd("ZRANGE", "z", hi, lo, "BYSCORE", "REV") == bs(*reversed(want))
    scores = {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
    assert raw.cmd("ZRANGEBYSCORE", "z", lo, hi, "WITHSCORES") == bs(
        *[x for m in want for x in (m, scores[m])])


def test_zrangebyscore_limit(z5):
    raw = z5
    assert raw.cmd("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2") == bs("b", "c")
    assert raw.cmd("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2") == bs(
        "b", "2", "c", "3")
    assert raw.cmd("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "2", "WITHSCORES") == bs(
        "b", "2", "c", "3")
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "0", "-1") == bs(*"abcde")
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "0", "-5") == bs(*"abcde")
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "0", "0") == []
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "-1", "5") == []
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "4", "10") == bs("e")
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "9223372036854775807", "1") == []
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "0", "9223372036854775807") == bs(
        *"abcde")
    assert raw.cmd("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "1", "2") == bs("d", "c")
    assert raw.cmd("ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "0", "2",
                   "WITHSCORES") == bs("e", "5", "d", "4")
    assert raw.cmd("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2") == bs("b", "c")


def test_zrangebyscore_errors(z5):
    raw = z5
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "x") == MINMAX_FLOAT
    assert raw.cmd("ZRANGEBYSCORE", "z", "nan", "1") == MINMAX_FLOAT
    assert raw.cmd("ZRANGEBYSCORE", "z", "[1", "2") == MINMAX_FLOAT
    assert raw.cmd("ZREVRANGEBYSCORE", "z", "2", "x") == MINMAX_FLOAT
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "LIMIT", "0") == SYNTAX
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "FOO") == SYNTAX
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "BYLEX") == SYNTAX
    assert raw.cmd("ZRANGEBYSCORE", "z", "1", "5", "REV") == SYNTAX
    assert raw.cmd("ZRANGEBYSCORE", "z", "1") == arity("zrangebyscore")
    assert raw.cmd("ZREVRANGEBYSCORE", "z", "1") == arity("zrevrangebyscore")
    assert raw.cmd("ZRANGEBYSCORE", "nokey", "-inf", "+inf") == []


# -- ZRANGESTORE -------------------------------------------------------------------

def test_zrangestore(z5):
    raw = z5
    assert raw.cmd("ZRANGESTORE", "dst", "z", "0", "1") == 2
    assert raw.cmd("ZRANGE", "dst", "0", "-1", "WITHSCORES") == bs("a", "1", "b", "2")
    assert raw.cmd("ZRANGESTORE", "dst", "z", "(2", "+inf", "BYSCORE", "LIMIT", "0", "2") == 2
    assert raw.cmd("ZRANGE", "dst", "0", "-1", "WITHSCORES") == bs("c", "3", "d", "4")
    assert raw.cmd("ZRANGESTORE", "dst", "z", "[e", "-", "BYLEX", "REV", "LIMIT", "0", "2") == 2
    assert raw.cmd("ZRANGE", "dst", "0", "-1") == bs("d", "e")
    assert raw.cmd("ZRANGESTORE", "dst", "z", "0", "-1", "REV") == 5
    assert raw.cmd("ZRANGE", "dst", "0", "-1") == bs(*"abcde")  # stored sorted all the same
    # an empty range deletes the destination
    assert raw.cmd("ZRANGESTORE", "dst", "z", "10", "20") == 0
    assert raw.cmd("EXISTS", "dst") == 0
    raw.cmd("SET", "dst", "x")
    assert raw.cmd("ZRANGESTORE", "dst", "nokey", "0", "-1") == 0
    assert raw.cmd("EXISTS", "dst") == 0
    # the destination's old type does not matter
    raw.cmd("SET", "str", "v")
    assert raw.cmd("ZRANGESTORE", "str", "z", "0", "0") == 1
    assert raw.cmd("TYPE", "str") == "zset"
    # the source may be the destination
    assert raw.cmd("ZRANGESTORE", "z", "z", "1", "2") == 2
    assert raw.cmd("ZRANGE", "z", "0", "-1") == bs("b", "c")


def test_zrangestore_errors(z5):
    raw = z5
    raw.cmd("SET", "str", "v")
    assert raw.cmd("ZRANGESTORE", "dst", "z", "0", "-1", "WITHSCORES") == SYNTAX
    assert raw.cmd("ZRANGESTORE", "dst", "z", "0", "-1", "LIMIT", "0", "1") == LIMIT_ONLY
    assert raw.cmd("ZRANGESTORE", "dst", "str", "0", "-1") == WRONGTYPE
    assert raw.cmd("ZRANGESTORE", "dst", "z", "0") == arity("zrangestore")
    assert raw.cmd("EXISTS", "dst") == 0


# -- ZREMRANGEBY* ------------------------------------------------------------------

def test_zremrangebyrank(z5):
    raw = z5
    assert raw.cmd("ZREMRANGEBYRANK", "z", "0", "0") == 1
    assert raw.cmd("ZREMRANGEBYRANK", "z", "-1", "-1") == 1
    assert raw.cmd("ZRANGE", "z", "0", "-1") == bs("b", "c", "d")
    assert raw.cmd("ZREMRANGEBYRANK", "z", "5", "10") == 0
    assert raw.cmd("ZREMRANGEBYRANK", "z", "2", "1") == 0
    assert raw.cmd("ZREMRANGEBYRANK", "z", "x", "1") == NOT_INT
    assert raw.cmd("ZREMRANGEBYRANK", "nokey", "0", "1") == 0
    assert raw.cmd("ZREMRANGEBYRANK", "z", "-9223372036854775808", "9223372036854775807") == 3
    assert raw.cmd("EXISTS", "z") == 0
    assert raw.cmd("ZREMRANGEBYRANK", "z", "0") == arity("zremrangebyrank")


def test_zremrangebyscore(z5):
    raw = z5
    assert raw.cmd("ZREMRANGEBYSCORE", "z", "(1", "3") == 2
    assert raw.cmd("ZRANGE", "z", "0", "-1") == bs("a", "d", "e")
    assert raw.cmd("ZREMRANGEBYSCORE", "z", "5", "1") == 0
    assert raw.cmd("ZREMRANGEBYSCORE", "z", "x", "3") == MINMAX_FLOAT
    assert raw.cmd("ZREMRANGEBYSCORE", "nokey", "0", "1") == 0
    assert raw.cmd("ZREMRANGEBYSCORE", "z", "-inf", "+inf") == 3
    assert raw.cmd("EXISTS", "z") == 0
    assert raw.cmd("ZREMRANGEBYSCORE", "z", "0") == arity("zremrangebyscore")


def test_zremrangebylex(lexz):
    raw = lexz
    assert raw.cmd("ZREMRANGEBYLEX", "l", "[a", "(b") == 3
    assert raw.cmd("ZRANGE", "l", "0", "-1") == bs("", "b", "c")
    assert raw.cmd("ZREMRANGEBYLEX", "l", "(c", "+") == 0
    assert raw.cmd("ZREMRANGEBYLEX", "nokey", "-", "+") == 0
    assert raw.cmd("ZREMRANGEBYLEX", "l", "-", "+") == 3
    assert raw.cmd("EXISTS", "l") == 0
    assert raw.cmd("ZREMRANGEBYLEX", "l", "-") == arity("zremrangebylex")


# -- ZPOPMIN ZPOPMAX ZMPOP -----------------------------------------------------------

def test_zpopmin_zpopmax(raw):
    raw.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d")
    assert raw.cmd("ZPOPMIN", "z") == bs("a", "1")
    assert raw.cmd("ZPOPMAX", "z") == bs("d", "4")
    assert raw.cmd("ZPOPMIN", "z", "1") == bs("b", "2")  # flat in RESP2, even with a count
    assert raw.cmd("ZPOPMAX", "z", "10") == bs("c", "3")
    assert raw.cmd("EXISTS", "z") == 0
    raw.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert raw.cmd("ZPOPMAX", "z", "2") == bs("c", "3", "b", "2")
    assert raw.cmd("ZPOPMIN", "z", "9223372036854775807") == bs("a", "1")
    assert raw.cmd("EXISTS", "z") == 0


def test_zpop_edge_cases(raw):
    # a missing key: an empty array, not nil
    assert raw_reply(raw, "ZPOPMIN", "nokey") == b"*0\r\n"
    assert raw_reply(raw, "ZPOPMAX", "nokey", "2") == b"*0\r\n"
    assert raw_reply(raw, "ZPOPMAX", "nokey", "0") == b"*0\r\n"
    raw.cmd("ZADD", "z", "1", "a")
    assert raw_reply(raw, "ZPOPMIN", "z", "0") == b"*0\r\n"
    assert raw.cmd("ZCARD", "z") == 1
    for cmd in ("ZPOPMIN", "ZPOPMAX"):
        assert raw.cmd(cmd, "z", "-1") == MUST_BE_POSITIVE
        assert raw.cmd(cmd, "z", "x") == MUST_BE_POSITIVE
        assert raw.cmd(cmd, "nokey", "-1") == MUST_BE_POSITIVE
        assert raw.cmd(cmd, "z", "1", "2") == SYNTAX
        assert raw.cmd(cmd) == arity(cmd.lower())
    assert raw.cmd("ZCARD", "z") == 1


def test_zpop_redis_py(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zpopmin("z") == [("a", 1.0)]
    assert r.zpopmax("z", 5) == [("c", 3.0), ("b", 2.0)]
    assert r.zpopmin("z") == []


def test_zmpop(raw):
    raw.cmd("ZADD", "z2", "1", "a", "2", "b", "3", "c")
    # nested [member, score] pairs, even in RESP2
    assert raw.cmd("ZMPOP", "2", "z1", "z2", "MIN") == [b"z2", [bs("a", "1")]]
    assert raw.cmd("ZMPOP", "2", "z1", "z2", "MAX", "COUNT", "10") == [
        b"z2", [bs("c", "3"), bs("b", "2")]]
    assert raw.cmd("EXISTS", "z2") == 0
    assert raw_reply(raw, "ZMPOP", "2", "z1", "z2", "MIN") == b"*-1\r\n"
    raw.cmd("ZADD", "z1", "5", "x", "6", "y")
    raw.cmd("ZADD", "z2", "1", "q")
    assert raw.cmd("ZMPOP", "2", "z1", "z2", "min", "count", "1") == [b"z1", [bs("x", "5")]]
    assert raw.cmd("ZMPOP", "2", "z1", "z1", "MAX", "COUNT", "9223372036854775807") == [
        b"z1", [bs("y", "6")]]
    assert raw.cmd("ZMPOP", "2", "z1", "z2", "MAX") == [b"z2", [bs("q", "1")]]


def test_zmpop_errors(raw):
    raw.cmd("ZADD", "z", "1", "a")
    raw.cmd("SET", "str", "v")
    assert raw.cmd("ZMPOP", "0", "z", "MIN") == Err("ERR numkeys should be greater than 0")
    assert raw.cmd("ZMPOP", "-1", "z", "MIN") == Err("ERR numkeys should be greater than 0")
    assert raw.cmd("ZMPOP", "x", "z", "MIN") == Err("ERR numkeys should be greater than 0")
    assert raw.cmd("ZMPOP", "1", "z", "FOO") == SYNTAX
    assert raw.cmd("ZMPOP", "2", "z", "MIN") == SYNTAX
    assert raw.cmd("ZMPOP", "1", "z", "MIN", "COUNT", "0") == Err(
        "ERR count should be greater than 0")
    assert raw.cmd("ZMPOP", "1", "z", "MIN", "COUNT", "-1") == Err(
        "ERR count should be greater than 0")
    assert raw.cmd("ZMPOP", "1", "z", "MIN", "COUNT") == SYNTAX
    assert raw.cmd("ZMPOP", "1", "z", "MIN", "COUNT", "1", "COUNT", "1") == SYNTAX
    assert raw.cmd("ZMPOP", "1", "z") == arity("zmpop")
    assert raw.cmd("ZMPOP", "2", "nokey", "str", "MIN") == WRONGTYPE
    assert raw.cmd("ZMPOP", "2", "str", "z", "MIN") == WRONGTYPE
    assert raw.cmd("ZCARD", "z") == 1


def test_zmpop_redis_py(r):
    r.zadd("b", {"x": 1, "y": 2})
    assert r.zmpop(2, ["a", "b"], max=True) == ["b", [["y", "2"]]]
    assert r.zmpop(1, ["a"], min=True) is None


# -- ZRANDMEMBER ------------------------------------------------------------------

@pytest.mark.parametrize("n", [5, 300])
def test_zrandmember(raw, n):
    scores = {f"m{i}".encode(): str(i).encode() for i in range(n)}
    raw.cmd("ZADD", "z", *[x for m, s in scores.items() for x in (s, m)])
    for _ in range(10):
        assert raw.cmd("ZRANDMEMBER", "z") in scores
    for count in (1, 3, n - 1, n, n + 1, 100000):
        got = raw.cmd("ZRANDMEMBER", "z", str(count))
        assert len(got) == min(count, n) and len(set(got)) == len(got)
        assert set(got) <= set(scores)
        got = raw.cmd("ZRANDMEMBER", "z", str(count), "WITHSCORES")
        assert len(got) == 2 * min(count, n)
        assert len(set(got[::2])) == min(count, n)
        for m, s in zip(got[::2], got[1::2]):
            assert scores[m] == s
    got = raw.cmd("ZRANDMEMBER", "z", "-1000")
    assert len(got) == 1000 and set(got) <= set(scores)
    got = raw.cmd("ZRANDMEMBER", "z", "-20", "WITHSCORES")
    assert len(got) == 40
    for m, s in zip(got[::2], got[1::2]):
        assert scores[m] == s
    assert raw.cmd("ZCARD", "z") == n


def test_zrandmember_edge_cases(raw):
    assert raw_reply(raw, "ZRANDMEMBER", "nokey") == b"$-1\r\n"
    assert raw_reply(raw, "ZRANDMEMBER", "nokey", "2") == b"*0\r\n"
    assert raw_reply(raw, "ZRANDMEMBER", "nokey", "-2", "WITHSCORES") == b"*0\r\n"
    raw.cmd("ZADD", "z", "1.5", "a")
    assert raw_reply(raw, "ZRANDMEMBER", "z", "0") == b"*0\r\n"
    assert raw.cmd("ZRANDMEMBER", "z", "-2", "WITHSCORES") == bs("a", "1.5", "a", "1.5")
    assert raw.cmd("ZRANDMEMBER", "z", "x") == NOT_INT
    assert raw.cmd("ZRANDMEMBER", "z", "1", "FOO") == SYNTAX
    assert raw.cmd("ZRANDMEMBER", "z", "-9223372036854775808") == Err(
        "ERR value is out of range, value must between "
        "-9223372036854775807 and 9223372036854775807")
    assert raw.cmd("ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES") == Err(
        "ERR value is out of range")
    assert raw.cmd("ZRANDMEMBER") == arity("zrandmember")


# -- ZUNION ZINTER ZDIFF and STORE ---------------------------------------------------

@pytest.fixture
def zz(raw):
    raw.cmd("ZADD", "z1", "1", "a", "2", "b", "3", "c")
    raw.cmd("ZADD", "z2", "10", "b", "20", "c", "30", "d")
    return raw


def test_zunion(zz):
    raw = zz
    assert raw.cmd("ZUNION", "2", "z1", "z2") == bs("a", "b", "c", "d")
    assert raw.cmd("ZUNION", "2", "z1", "z2", "WITHSCORES") == bs(
        "a", "1", "b", "12", "c", "23", "d", "30")
    assert raw.cmd("ZUNION", "2", "z1", "z2", "WEIGHTS", "2", "1", "WITHSCORES") == bs(
        "a", "2", "b", "14", "c", "26", "d", "30")
    assert raw.cmd("ZUNION", "2", "z1", "z2", "AGGREGATE", "MIN", "WITHSCORES") == bs(
        "a", "1", "b", "2", "c", "3", "d", "30")
    assert raw.cmd("ZUNION", "2", "z1", "z2", "aggregate", "max", "WITHSCORES") == bs(
        "a", "1", "b", "10", "c", "20", "d", "30")
    assert raw.cmd("ZUNION", "2", "z1", "z2", "WEIGHTS", "1", "-1", "WITHSCORES") == bs(
        "d", "-30", "c", "-17", "b", "-8", "a", "1")
    assert raw.cmd("ZUNION", "3", "z1", "nokey", "z2", "WITHSCORES") == bs(
        "a", "1", "b", "12", "c", "23", "d", "30")
    assert raw.cmd("ZUNION", "2", "z1", "z1", "WITHSCORES") == bs("a", "2", "b", "4", "c", "6")
    assert raw_reply(raw, "ZUNION", "1", "nokey") == b"*0\r\n"


def test_zinter(zz):
    raw = zz
    assert raw.cmd("ZINTER", "2", "z1", "z2") == bs("b", "c")
    assert raw.cmd("ZINTER", "2", "z1", "z2", "WITHSCORES") == bs("b", "12", "c", "23")
    assert raw.cmd("ZINTER", "2", "z1", "z2", "AGGREGATE", "MAX", "WEIGHTS", "1", "0.5",
                   "WITHSCORES") == bs("b", "5", "c", "10")
    assert raw.cmd("ZINTER", "2", "z1", "z2", "AGGREGATE", "MIN", "WITHSCORES") == bs(
        "b", "2", "c", "3")
    assert raw_reply(raw, "ZINTER", "2", "z1", "nokey") == b"*0\r\n"
    assert raw.cmd("ZINTER", "1", "z1", "WITHSCORES") == bs("a", "1", "b", "2", "c", "3")


def test_zdiff(zz):
    raw = zz
    assert raw.cmd("ZDIFF", "2", "z1", "z2", "WITHSCORES") == bs("a", "1")
    assert raw.cmd("ZDIFF", "2", "z2", "z1") == bs("d")
    assert raw.cmd("ZDIFF", "1", "z2", "WITHSCORES") == bs("b", "10", "c", "20", "d", "30")
    assert raw.cmd("ZDIFF", "2", "z1", "nokey") == bs("a", "b", "c")
    assert raw_reply(raw, "ZDIFF", "2", "nokey", "z1") == b"*0\r\n"
    assert raw_reply(raw, "ZDIFF", "2", "z1", "z1") == b"*0\r\n"
    assert raw.cmd("ZDIFF", "1", "z1", "WEIGHTS", "1") == SYNTAX
    assert raw.cmd("ZDIFF", "1", "z1", "AGGREGATE", "SUM") == SYNTAX


def test_zsetops_order_by_score_then_member(raw):
    raw.cmd("ZADD", "z1", "2", "b", "1", "y", "2", "a")
    raw.cmd("ZADD", "z2", "1", "x", "0", "b")
    assert raw.cmd("ZUNION", "2", "z1", "z2", "WITHSCORES") == bs(
        "x", "1", "y", "1", "a", "2", "b", "2")


def test_zsetops_accept_plain_sets(zz):
    raw = zz
    raw.cmd("SADD", "s", "a", "x")  # a set member scores 1
    assert raw.cmd("ZUNION", "2", "z1", "s", "WITHSCORES") == bs(
        "x", "1", "a", "2", "b", "2", "c", "3")
    assert raw.cmd("ZINTER", "2", "z1", "s", "WITHSCORES") == bs("a", "2")
    assert raw.cmd("ZINTER", "2", "s", "z1", "WEIGHTS", "5", "1", "WITHSCORES") == bs("a", "6")
    assert raw.cmd("ZDIFF", "2", "z1", "s") == bs("b", "c")
    assert raw.cmd("ZDIFF", "2", "s", "z1", "WITHSCORES") == bs("x", "1")
    assert raw.cmd("ZINTERCARD", "2", "z1", "s") == 1
    assert raw.cmd("ZUNIONSTORE", "d", "1", "s") == 2
    assert raw.cmd("TYPE", "d") == "zset"


def test_zsetops_inf_and_nan(raw):
    raw.cmd("ZADD", "zn", "-inf", "a")
    raw.cmd("ZADD", "zp", "inf", "a")
    raw.cmd("ZADD", "z0", "0", "a")
    # inf + -inf and 0 * inf are NaN; Redis stores 0
    assert raw.cmd("ZUNION", "2", "zn", "zp", "WITHSCORES") == bs("a", "0")
    assert raw.cmd("ZINTER", "2", "zn", "zp", "WITHSCORES") == bs("a", "0")
    assert raw.cmd("ZUNION", "1", "z0", "WEIGHTS", "inf", "WITHSCORES") == bs("a", "0")
    assert raw.cmd("ZUNION", "1", "zp", "WEIGHTS", "-1", "WITHSCORES") == bs("a", "-inf")
    assert raw.cmd("ZUNION", "2", "zn", "zp", "AGGREGATE", "MAX", "WITHSCORES") == bs("a", "inf")
    assert raw.cmd("ZUNIONSTORE", "d", "2", "zn", "zp") == 1
    assert raw.cmd("ZSCORE", "d", "a") == b"0"


def test_zsetops_errors(zz):
    raw = zz
    raw.cmd("SET", "str", "v")
    for cmd in ("ZUNION", "ZINTER", "ZDIFF"):
        lc = cmd.lower()
        no_keys = Err(f"ERR at least 1 input key is needed for '{lc}' command")
        assert raw.cmd(cmd, "0", "z1") == no_keys
        assert raw.cmd(cmd, "-1", "z1") == no_keys
        assert raw.cmd(cmd, "x", "z1") == NOT_INT
        assert raw.cmd(cmd, "3", "z1", "z2") == SYNTAX
        assert raw.cmd(cmd, "2", "z1", "z2", "FOO") == SYNTAX
        assert raw.cmd(cmd, "2", "z1", "str") == WRONGTYPE
        assert raw.cmd(cmd, "2", "nokey", "str") == WRONGTYPE
        assert raw.cmd(cmd, "1") == arity(lc)
    for cmd in ("ZUNION", "ZINTER"):
        assert raw.cmd(cmd, "2", "z1", "z2", "WEIGHTS", "1") == SYNTAX
        assert raw.cmd(cmd, "2", "z1", "z2", "WEIGHTS", "1", "2", "3") == SYNTAX
        assert raw.cmd(cmd, "2", "z1", "z2", "WEIGHTS", "1", "x") == Err(
            "ERR weight value is not a float")
        assert raw.cmd(cmd, "1", "z1", "WEIGHTS", "nan") == Err("ERR weight value is not a float")
        assert raw.cmd(cmd, "2", "z1", "z2", "AGGREGATE", "AVG") == SYNTAX
        assert raw.cmd(cmd, "2", "z1", "z2", "AGGREGATE") == SYNTAX


def test_zsetops_repeated_options(zz):
    raw = zz
    # the last AGGREGATE and the last WEIGHTS win
    assert raw.cmd("ZUNION", "2", "z1", "z2", "AGGREGATE", "SUM", "AGGREGATE", "MIN",
                   "WITHSCORES") == bs("a", "1", "b", "2", "c", "3", "d", "30")
    assert raw.cmd("ZUNION", "2", "z1", "z2", "WEIGHTS", "1", "1", "WEIGHTS", "2", "2",
                   "WITHSCORES") == bs("a", "2", "b", "24", "c", "46", "d", "60")


def test_zsetops_store(zz):
    raw = zz
    assert raw.cmd("ZUNIONSTORE", "d", "2", "z1", "z2") == 4
    assert raw.cmd("ZRANGE", "d", "0", "-1", "WITHSCORES") == bs(
        "a", "1", "b", "12", "c", "23", "d", "30")
    assert raw.cmd("ZUNIONSTORE", "d", "2", "z1", "z2", "WEIGHTS", "1", "-1") == 4
    assert raw.cmd("ZRANGE", "d", "0", "-1", "WITHSCORES") == bs(
        "d", "-30", "c", "-17", "b", "-8", "a", "1")
    assert raw.cmd("ZINTERSTORE", "d", "2", "z1", "z2", "AGGREGATE", "MAX") == 2
    assert raw.cmd("ZRANGE", "d", "0", "-1", "WITHSCORES") == bs("b", "10", "c", "20")
    assert raw.cmd("ZDIFFSTORE", "d", "2", "z2", "z1") == 1
    assert raw.cmd("ZRANGE", "d", "0", "-1", "WITHSCORES") == bs("d", "30")
    # the destination may be a source
    assert raw.cmd("ZUNIONSTORE", "z1", "2", "z1", "z2", "AGGREGATE", "MIN") == 4
    assert raw.cmd("ZRANGE", "z1", "0", "-1", "WITHSCORES") == bs(
        "a", "1", "b", "2", "c", "3", "d", "30")


def test_zsetops_store_empty_and_overwrite(zz):
    raw = zz
    raw.cmd("ZADD", "d", "1", "old")
    assert raw.cmd("ZINTERSTORE", "d", "2", "z1", "nokey") == 0
    assert raw.cmd("EXISTS", "d") == 0
    raw.cmd("ZADD", "d", "1", "old")
    assert raw.cmd("ZDIFFSTORE", "d", "2", "z1", "z1") == 0
    assert raw.cmd("EXISTS", "d") == 0
    raw.cmd("ZADD", "d", "1", "old")
    assert raw.cmd("ZUNIONSTORE", "d", "1", "nokey") == 0
    assert raw.cmd("EXISTS", "d") == 0
    raw.cmd("SET", "d", "string", "EX", "100")
    assert raw.cmd("ZUNIONSTORE", "d", "1", "z1") == 3
    assert raw.cmd("TYPE", "d") == "zset"
    assert raw.cmd("TTL", "d") == -1


def test_zsetops_store_errors(zz):
    raw = zz
    raw.cmd("SET", "str", "v")
    for cmd in ("ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"):
        lc = cmd.lower()
        assert raw.cmd(cmd, "d", "0", "z1") == Err(
            f"ERR at least 1 input key is needed for '{lc}' command")
        assert raw.cmd(cmd, "d", "1", "z1", "WITHSCORES") == SYNTAX
        assert raw.cmd(cmd, "d", "2", "z1", "str") == WRONGTYPE
        assert raw.cmd(cmd, "d", "3", "z1", "z2") == SYNTAX
        assert raw.cmd(cmd, "d", "1") == arity(lc)
    assert raw.cmd("ZDIFFSTORE", "d", "1", "z1", "WEIGHTS", "1") == SYNTAX
    assert raw.cmd("EXISTS", "d") == 0


def test_zsetops_redis_py(r):
    r.zadd("a", {"x": 1, "y": 2})
    r.zadd("b", {"y": 3, "z": 4})
    assert r.zunion(["a", "b"], withscores=True) == [("x", 1.0), ("z", 4.0), ("y", 5.0)]
    assert r.zinter({"a": 2, "b": 1}, withscores=True) == [("y", 7.0)]
    assert r.zdiff(["a", "b"]) == ["x"]
    assert r.zunionstore("d", ["a", "b"], aggregate="MAX") == 3
    assert r.zrange("d", 0, -1, withscores=True) == [("x", 1.0), ("y", 3.0), ("z", 4.0)]
    assert r.zinterstore("d", ["a", "b"], aggregate="MIN") == 1
    assert r.zdiffstore("d", ["b", "a"]) == 1


# -- ZINTERCARD ---------------------------------------------------------------

def test_zintercard(zz):
    raw = zz
    raw.cmd("SET", "str", "v")
    assert raw.cmd("ZINTERCARD", "2", "z1", "z2") == 2
    assert raw.cmd("ZINTERCARD", "1", "z1") == 3
    assert raw.cmd("ZINTERCARD", "2", "z1", "z2", "LIMIT", "1") == 1
    assert raw.cmd("ZINTERCARD", "2", "z1", "z2", "LIMIT", "0") == 2
    assert raw.cmd("ZINTERCARD", "2", "z1", "nokey") == 0
    assert raw.cmd("ZINTERCARD", "0", "z1") == Err(
        "ERR at least 1 input key is needed for 'zintercard' command")
    assert raw.cmd("ZINTERCARD", "3", "z1", "z2") == SYNTAX
    assert raw.cmd("ZINTERCARD", "2", "z1", "z2", "LIMIT", "-1") == Err(
        "ERR LIMIT can't be negative")
    assert raw.cmd("ZINTERCARD", "1", "z1", "WEIGHTS", "1") == SYNTAX
    assert raw.cmd("ZINTERCARD", "2", "z1", "str") == WRONGTYPE
    assert raw.cmd("ZINTERCARD", "1") == arity("zintercard")


# -- ZSCAN --------------------------------------------------------------------

def zscan_all(raw, key, *opts):
    seen = {}
    cursor = b"0"
    for _ in range(100000):
        reply = raw.cmd("ZSCAN", key, cursor, *opts)
        assert isinstance(reply, list) and len(reply) == 2, reply
        cursor, flat = reply
        assert isinstance(cursor, bytes) and cursor.isdigit()
        assert len(flat) % 2 == 0
        for m, s in zip(flat[::2], flat[1::2]):
            assert seen.get(m, s) == s
            seen[m] = s
        if cursor == b"0":
            return seen
    raise AssertionError("ZSCAN never returned cursor 0")


@pytest.mark.parametrize("n", [10, 1000])
def test_zscan(raw, n):
    want = {f"m{i}".encode(): str(i / 2).replace(".0", "").encode() for i in range(n)}
    raw.cmd("ZADD", "z", *[x for m, s in want.items() for x in (s, m)])
    assert zscan_all(raw, "z") == want
    assert zscan_all(raw, "z", "COUNT", "5") == want
    assert zscan_all(raw, "z", "MATCH", "m1*") == {m: s for m, s in want.items()
                                                   if m.startswith(b"m1")}
    assert zscan_all(raw, "z", "MATCH", "nomatch") == {}


def test_zscan_errors(raw):
    assert raw_reply(raw, "ZSCAN", "nokey", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"
    raw.cmd("ZADD", "z", "1", "a")
    assert raw.cmd("ZSCAN", "z", "x") == Err("ERR invalid cursor")
    assert raw.cmd("ZSCAN", "z", "0", "COUNT", "0") == SYNTAX
    assert raw.cmd("ZSCAN", "z", "0", "COUNT", "x") == NOT_INT
    assert raw.cmd("ZSCAN", "z", "0", "MATCH") == SYNTAX
    assert raw.cmd("ZSCAN", "z") == arity("zscan")


def test_zscan_redis_py(r):
    d = {f"k{i}": float(i) for i in range(300)}
    r.zadd("z", d)
    assert dict(r.zscan_iter("z")) == d


# -- a large sorted set against a model ------------------------------------------------

def test_skiplist_against_model(r):
    rnd = random.Random(7)
    model = {}
    for i in range(300):
        m = f"m{rnd.randrange(400)}"
        s = rnd.choice([rnd.randrange(-50, 50), rnd.random() * 100 - 50])
        r.zadd("z", {m: s})
        model[m] = s
    for i in range(100):
        m = f"m{rnd.randrange(400)}"
        inc = rnd.randrange(-10, 10)
        model[m] = model.get(m, 0) + inc
        assert r.zincrby("z", inc, m) == model[m]
    for m in rnd.sample(sorted(model), 50):
        assert r.zrem("z", m) == 1
        del model[m]
    order = sorted(model.items(), key=lambda kv: (kv[1], kv[0].encode()))
    assert r.zcard("z") == len(model)
    assert r.zrange("z", 0, -1, withscores=True) == order
    assert r.zrange("z", 10, 20) == [m for m, _ in order[10:21]]
    assert r.zrevrange("z", 0, 4) == [m for m, _ in reversed(order)][:5]
    for m, _ in order[::17]:
        assert r.zrank("z", m) == [x for x, _ in order].index(m)
    lo, hi = -20, 20
    inside = [m for m, s in order if lo <= s <= hi]
    assert r.zrangebyscore("z", lo, hi) == inside
    assert r.zcount("z", lo, hi) == len(inside)
    assert r.zrangebyscore("z", lo, hi, start=3, num=5) == inside[3:8]
    assert r.zremrangebyscore("z", lo, hi) == len(inside)
    assert r.zcard("z") == len(model) - len(inside)


# -- types, encodings, RESP3 ------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["ZADD", "k", "1", "a"], ["ZINCRBY", "k", "1", "a"], ["ZREM", "k", "a"], ["ZCARD", "k"],
    ["ZCOUNT", "k", "0", "1"], ["ZLEXCOUNT", "k", "-", "+"], ["ZSCORE", "k", "a"],
    ["ZMSCORE", "k", "a"], ["ZRANK", "k", "a"], ["ZREVRANK", "k", "a"],
    ["ZRANGE", "k", "0", "-1"], ["ZRANGE", "k", "0", "1", "BYSCORE"],
    ["ZRANGEBYSCORE", "k", "0", "1"], ["ZREVRANGEBYSCORE", "k", "1", "0"],
    ["ZRANGEBYLEX", "k", "-", "+"], ["ZREVRANGEBYLEX", "k", "+", "-"],
    ["ZREVRANGE", "k", "0", "-1"], ["ZRANGESTORE", "d", "k", "0", "-1"],
    ["ZREMRANGEBYRANK", "k", "0", "1"], ["ZREMRANGEBYSCORE", "k", "0", "1"],
    ["ZREMRANGEBYLEX", "k", "-", "+"], ["ZPOPMIN", "k"], ["ZPOPMAX", "k", "2"],
    ["ZMPOP", "1", "k", "MIN"], ["ZRANDMEMBER", "k"], ["ZRANDMEMBER", "k", "2"],
    ["ZUNION", "1", "k"], ["ZINTER", "1", "k"], ["ZDIFF", "1", "k"],
    ["ZUNIONSTORE", "d", "1", "k"], ["ZINTERSTORE", "d", "1", "k"],
    ["ZDIFFSTORE", "d", "1", "k"], ["ZINTERCARD", "1", "k"], ["ZSCAN", "k", "0"],
])
def test_wrongtype(raw, args):
    raw.cmd("RPUSH", "k", "x")
    assert raw.cmd(*args) == WRONGTYPE
    assert raw.cmd("LRANGE", "k", "0", "-1") == [b"x"]
    assert raw.cmd("EXISTS", "d") == 0


def test_zset_keeps_ttl(raw):
    raw.cmd("ZADD", "z", "1", "a", "2", "b")
    raw.cmd("EXPIRE", "z", "100")
    raw.cmd("ZADD", "z", "3", "c")
    raw.cmd("ZINCRBY", "z", "1", "a")
    raw.cmd("ZREM", "z", "b")
    raw.cmd("ZPOPMIN", "z")
    assert 0 < raw.cmd("TTL", "z") <= 100


def test_object_encoding_zset(raw):
    raw.cmd("ZADD", "small", "1", "a", "2", "b")
    assert raw.cmd("OBJECT", "ENCODING", "small") == b"listpack"
    raw.cmd("ZADD", "big", *[x for i in range(200) for x in (str(i), f"m{i}")])
    assert raw.cmd("OBJECT", "ENCODING", "big") == b"skiplist"
    raw.cmd("ZADD", "long", "1", "x" * 100)
    assert raw.cmd("OBJECT", "ENCODING", "long") == b"skiplist"


def test_zset_resp3(raw):
    assert isinstance(raw.cmd("HELLO", "3"), Map)
    raw.cmd("ZADD", "z", "1", "a", "2.5", "b")
    assert raw_reply(raw, "ZSCORE", "z", "nomember") == b"_\r\n"
    assert raw_reply(raw, "ZMSCORE", "z", "a", "x") == b"*2\r\n,1\r\n_\r\n"
    assert raw_reply(raw, "ZRANGE", "z", "0", "-1") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert raw_reply(raw, "ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES") == (
        b"*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n")
    assert raw_reply(raw, "ZUNION", "1", "z", "WITHSCORES") == (
        b"*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n")
    assert raw_reply(raw, "ZADD", "z", "INCR", "1", "a") == b",2\r\n"
    assert raw_reply(raw, "ZADD", "z", "NX", "INCR", "1", "a") == b"_\r\n"
    assert raw_reply(raw, "ZRANDMEMBER", "z", "-1", "WITHSCORES") in (
        b"*1\r\n*2\r\n$1\r\na\r\n,2\r\n", b"*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n")
    assert raw_reply(raw, "ZSCAN", "z", "0", "MATCH", "a") == (
        b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n2\r\n")  # ZSCAN stays flat, scores as bulk
    # ZPOPMIN without a count: one flat pair; with a count: nested pairs
    assert raw_reply(raw, "ZPOPMIN", "z") == b"*2\r\n$1\r\na\r\n,2\r\n"
    assert raw_reply(raw, "ZPOPMAX", "z", "5") == b"*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
    raw.cmd("ZADD", "z", "3", "c")
    assert raw_reply(raw, "ZMPOP", "1", "z", "MIN") == (
        b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nc\r\n,3\r\n")
    assert raw_reply(raw, "ZMPOP", "1", "z", "MIN") == b"_\r\n"
