"""String commands end to end (GET SET SETNX SETEX PSETEX GETSET GETDEL GETEX
MGET MSET MSETNX APPEND STRLEN INCR DECR INCRBY DECRBY INCRBYFLOAT GETRANGE
SETRANGE SUBSTR SETBIT GETBIT BITCOUNT BITPOS BITOP LCS), each reply and
error string as redis-server 7.0 sends it."""

import time

import pytest

from shoaltest import Err

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = Err("ERR value is not an integer or out of range")
SYNTAX = Err("ERR syntax error")


def arity(cmd):
    return Err(f"ERR wrong number of arguments for '{cmd}' command")


# -- GET / SET ------------------------------------------------------------------

def test_get_set_basic(raw):
    assert raw.cmd("GET", "k") is None
    assert raw.cmd("SET", "k", "v") == "OK"
    assert raw.cmd("GET", "k") == b"v"
    assert raw.cmd("SET", "k", "w") == "OK"
    assert raw.cmd("GET", "k") == b"w"


def test_set_binary_and_empty_values(rb):
    value = bytes(range(256)) * 4
    assert rb.set(b"\x00bin\xff", value) is True
    assert rb.get(b"\x00bin\xff") == value
    assert rb.set("empty", b"") is True
    assert rb.get("empty") == b""
    big = b"x" * (1 << 20)
    assert rb.set("big", big) is True
    assert rb.get("big") == big


def test_set_nx_xx(raw):
    assert raw.cmd("SET", "k", "1", "XX") is None
    assert raw.cmd("GET", "k") is None
    assert raw.cmd("SET", "k", "1", "NX") == "OK"
    assert raw.cmd("SET", "k", "2", "NX") is None
    assert raw.cmd("GET", "k") == b"1"
    assert raw.cmd("SET", "k", "3", "XX") == "OK"
    assert raw.cmd("GET", "k") == b"3"


def test_set_ex_px(raw):
    assert raw.cmd("SET", "k", "v", "EX", "100") == "OK"
    assert raw.cmd("TTL", "k") == 100
    assert raw.cmd("SET", "k", "v", "PX", "100000") == "OK"
    assert 99000 < raw.cmd("PTTL", "k") <= 100000
    assert raw.cmd("SET", "k", "v", "ex", "5") == "OK"  # options are case-insensitive
    assert 0 < raw.cmd("TTL", "k") <= 5


def test_set_exat_pxat(raw):
    at = int(time.time()) + 1000
    assert raw.cmd("SET", "k", "v", "EXAT", str(at)) == "OK"
    assert raw.cmd("EXPIRETIME", "k") == at
    assert raw.cmd("SET", "k", "v", "PXAT", str(at * 1000 + 123)) == "OK"
    assert raw.cmd("PEXPIRETIME", "k") == at * 1000 + 123
    # a time in the past: the key is gone at once
    assert raw.cmd("SET", "k", "v", "PXAT", "1") == "OK"
    assert raw.cmd("EXISTS", "k") == 0
    assert raw.cmd("SET", "k", "v", "EXAT", "1") == "OK"
    assert raw.cmd("GET", "k") is None


def test_set_expiry_really_expires(raw):
    assert raw.cmd("SET", "k", "v", "PX", "50") == "OK"
    deadline = time.monotonic() + 5
    while raw.cmd("GET", "k") is not None:
        assert time.monotonic() < deadline, "key with PX 50 never expired"
        time.sleep(0.02)
    assert raw.cmd("EXISTS", "k") == 0


def test_set_keepttl(raw):
    raw.cmd("SET", "k", "v", "EX", "100")
    assert raw.cmd("SET", "k", "w", "KEEPTTL") == "OK"
    assert raw.cmd("GET", "k") == b"w"
    assert 0 < raw.cmd("TTL", "k") <= 100
    assert raw.cmd("SET", "k", "x") == "OK"  # a plain SET drops the TTL
    assert raw.cmd("TTL", "k") == -1


def test_set_get_option(raw):
    assert raw.cmd("SET", "k", "v", "GET") is None
    assert raw.cmd("SET", "k", "w", "GET") == b"v"
    assert raw.cmd("SET", "k", "x", "XX", "GET") == b"w"
    assert raw.cmd("SET", "k", "y", "NX", "GET") == b"x"  # not set
    assert raw.cmd("GET", "k") == b"x"
    assert raw.cmd("SET", "n", "1", "NX", "GET") is None  # set
    assert raw.cmd("GET", "n") == b"1"
    assert raw.cmd("SET", "m", "1", "XX", "GET") is None  # not set
    assert raw.cmd("EXISTS", "m") == 0
    assert raw.cmd("SET", "k", "z", "GET", "EX", "100") == b"x"
    assert raw.cmd("TTL", "k") == 100


@pytest.mark.parametrize("args", [
    ["NX", "XX"], ["XX", "NX"], ["EX", "10", "PX", "10"], ["EX", "10", "EXAT", "10"],
    ["PX", "10", "PXAT", "10"], ["KEEPTTL", "EX", "10"], ["PX", "10", "KEEPTTL"],
    ["FOO"], ["EX"], ["PX"], ["GET", "GET", "FOO"],
])
def test_set_syntax_errors(raw, args):
    assert raw.cmd("SET", "k", "v", *args) == SYNTAX
    assert raw.cmd("EXISTS", "k") == 0


@pytest.mark.parametrize("args", [
    ["EX", "0"], ["EX", "-1"], ["PX", "0"], ["PX", "-5"], ["EXAT", "0"], ["PXAT", "0"],
    ["EX", "9999999999999999"], ["PX", "9223372036854775807"],
])
def test_set_invalid_expire(raw, args):
    assert raw.cmd("SET", "k", "v", *args) == Err("ERR invalid expire time in 'set' command")


def test_set_expire_not_integer(raw):
    assert raw.cmd("SET", "k", "v", "EX", "x") == NOT_INT
    assert raw.cmd("SET", "k", "v", "PX", "1.5") == NOT_INT


def test_set_arity(raw):
    assert raw.cmd("SET", "k") == arity("set")
    assert raw.cmd("GET") == arity("get")
    assert raw.cmd("GET", "a", "b") == arity("get")


# WRONGTYPE replies need a key of another type, which no command creates until
# lists arrive; crates/engine/tests/string_test.rs checks them on a list value
# written through the store.


# -- SETNX SETEX PSETEX GETSET GETDEL GETEX -------------------------------------

def test_setnx(raw):
    assert raw.cmd("SETNX", "k", "a") == 1
    assert raw.cmd("SETNX", "k", "b") == 0
    assert raw.cmd("GET", "k") == b"a"


def test_setex_psetex(raw):
    assert raw.cmd("SETEX", "k", "100", "v") == "OK"
    assert raw.cmd("TTL", "k") == 100
    assert raw.cmd("GET", "k") == b"v"
    assert raw.cmd("PSETEX", "p", "100000", "v") == "OK"
    assert 99000 < raw.cmd("PTTL", "p") <= 100000
    assert raw.cmd("SETEX", "k", "0", "v") == Err("ERR invalid expire time in 'setex' command")
    assert raw.cmd("SETEX", "k", "-1", "v") == Err("ERR invalid expire time in 'setex' command")
    assert raw.cmd("PSETEX", "k", "0", "v") == Err("ERR invalid expire time in 'psetex' command")
    assert raw.cmd("SETEX", "k", "x", "v") == NOT_INT
    assert raw.cmd("SETEX", "k", "10") == arity("setex")


def test_getset(raw):
    assert raw.cmd("GETSET", "k", "a") is None
    raw.cmd("EXPIRE", "k", "100")
    assert raw.cmd("GETSET", "k", "b") == b"a"
    assert raw.cmd("GET", "k") == b"b"
    assert raw.cmd("TTL", "k") == -1  # GETSET drops the TTL


def test_getdel(raw):
    raw.cmd("SET", "k", "v")
    assert raw.cmd("GETDEL", "k") == b"v"
    assert raw.cmd("GETDEL", "k") is None
    assert raw.cmd("EXISTS", "k") == 0


def test_getex(raw):
    assert raw.cmd("GETEX", "nokey", "EX", "10") is None
    raw.cmd("SET", "k", "v")
    assert raw.cmd("GETEX", "k") == b"v"
    assert raw.cmd("TTL", "k") == -1
    assert raw.cmd("GETEX", "k", "EX", "100") == b"v"
    assert raw.cmd("TTL", "k") == 100
    assert raw.cmd("GETEX", "k", "PX", "50000") == b"v"
    assert 49000 < raw.cmd("PTTL", "k") <= 50000
    at = int(time.time()) + 500
    assert raw.cmd("GETEX", "k", "EXAT", str(at)) == b"v"
    assert raw.cmd("EXPIRETIME", "k") == at
    assert raw.cmd("GETEX", "k", "PXAT", str(at * 1000 + 7)) == b"v"
    assert raw.cmd("PEXPIRETIME", "k") == at * 1000 + 7
    assert raw.cmd("GETEX", "k", "PERSIST") == b"v"
    assert raw.cmd("TTL", "k") == -1


def test_getex_errors(raw):
    raw.cmd("SET", "k", "v")
    assert raw.cmd("GETEX", "k", "PERSIST", "EX", "10") == SYNTAX
    assert raw.cmd("GETEX", "k", "EX", "10", "PX", "10") == SYNTAX
    assert raw.cmd("GETEX", "k", "FOO") == SYNTAX
    assert raw.cmd("GETEX", "k", "EX", "0") == Err("ERR invalid expire time in 'getex' command")
    assert raw.cmd("GETEX", "k", "EX", "x") == NOT_INT


# -- MGET MSET MSETNX -----------------------------------------------------------

def test_mget_mset(raw):
    assert raw.cmd("MSET", "a", "1", "b", "2", "c", "3") == "OK"
    assert raw.cmd("MGET", "a", "b", "nokey", "c") == [b"1", b"2", None, b"3"]
    assert raw.cmd("MSET", "a", "x", "a", "y") == "OK"  # the last one wins
    assert raw.cmd("GET", "a") == b"y"
    assert raw.cmd("MSET", "a") == arity("mset")
    assert raw.cmd("MSET", "a", "1", "b") == arity("mset")
    assert raw.cmd("MGET") == arity("mget")


def test_mset_clears_ttl(raw):
    raw.cmd("SET", "a", "1", "EX", "100")
    raw.cmd("MSET", "a", "2")
    assert raw.cmd("TTL", "a") == -1


def test_msetnx(raw):
    assert raw.cmd("MSETNX", "m1", "1", "m2", "2") == 1
    assert raw.cmd("MSETNX", "m2", "x", "m3", "3") == 0
    assert raw.cmd("MGET", "m1", "m2", "m3") == [b"1", b"2", None]
    assert raw.cmd("MSETNX", "a") == arity("msetnx")
    assert raw.cmd("MSETNX", "a", "1", "b") == arity("msetnx")


def test_mget_mset_many_keys(r):
    kv = {f"key:{i}": f"value:{i}" for i in range(1000)}
    assert r.mset(kv) is True
    assert r.mget(list(kv)) == list(kv.values())


# -- APPEND STRLEN --------------------------------------------------------------

def test_append_strlen(raw):
    assert raw.cmd("STRLEN", "a") == 0
    assert raw.cmd("APPEND", "a", "hello") == 5
    assert raw.cmd("APPEND", "a", " world") == 11
    assert raw.cmd("GET", "a") == b"hello world"
    assert raw.cmd("STRLEN", "a") == 11
    assert raw.cmd("APPEND", "a", "") == 11
    raw.cmd("SET", "n", "12")
    assert raw.cmd("APPEND", "n", "34") == 4
    assert raw.cmd("INCR", "n") == 1235


def test_append_keeps_ttl(raw):
    raw.cmd("SET", "a", "x", "EX", "100")
    raw.cmd("APPEND", "a", "y")
    assert 0 < raw.cmd("TTL", "a") <= 100


# -- INCR family ----------------------------------------------------------------

def test_incr_decr(raw):
    assert raw.cmd("INCR", "n") == 1
    assert raw.cmd("INCR", "n") == 2
    assert raw.cmd("DECR", "n") == 1
    assert raw.cmd("DECR", "d") == -1
    assert raw.cmd("INCRBY", "n", "10") == 11
    assert raw.cmd("INCRBY", "n", "-20") == -9
    assert raw.cmd("DECRBY", "n", "1") == -10
    assert raw.cmd("DECRBY", "n", "-15") == 5
    assert raw.cmd("GET", "n") == b"5"


def test_incr_keeps_ttl(raw):
    raw.cmd("SET", "n", "1", "EX", "100")
    assert raw.cmd("INCR", "n") == 2
    assert 0 < raw.cmd("TTL", "n") <= 100


def test_incr_errors(raw):
    raw.cmd("SET", "n", "abc")
    assert raw.cmd("INCR", "n") == NOT_INT
    assert raw.cmd("INCRBY", "n", "1") == NOT_INT
    for bad in [" 1", "1 ", "01x", "1.5", "", "99999999999999999999"]:
        raw.cmd("SET", "n", bad)
        assert raw.cmd("INCR", "n") == NOT_INT, bad
    raw.cmd("SET", "n", "1")
    assert raw.cmd("INCRBY", "n", "x") == NOT_INT
    assert raw.cmd("INCRBY", "n", "1.0") == NOT_INT
    assert raw.cmd("INCR") == arity("incr")
    assert raw.cmd("INCRBY", "n") == arity("incrby")


def test_incr_overflow(raw):
    raw.cmd("SET", "n", "9223372036854775807")
    assert raw.cmd("INCR", "n") == Err("ERR increment or decrement would overflow")
    assert raw.cmd("INCRBY", "n", "1") == Err("ERR increment or decrement would overflow")
    raw.cmd("SET", "n", "-9223372036854775808")
    assert raw.cmd("DECR", "n") == Err("ERR increment or decrement would overflow")
    assert raw.cmd("GET", "n") == b"-9223372036854775808"
    raw.cmd("SET", "n", "1")
    assert raw.cmd("DECRBY", "n", "-9223372036854775808") == Err("ERR decrement would overflow")
    assert raw.cmd("INCRBY", "n", "9223372036854775806") == 9223372036854775807


@pytest.mark.parametrize("start,incr,result", [
    ("1.10", "2.2", b"3.3"),
    ("0.1", "0.2", b"0.3"),
    ("10.50", "0.1", b"10.6"),
    ("5", "1.5", b"6.5"),
    ("3.0e3", "200", b"3200"),
    ("1.5e3", "0", b"1500"),
    ("1", "-1", b"0"),
    ("-2.5", "1", b"-1.5"),
])
def test_incrbyfloat_decimal(raw, start, incr, result):
    raw.cmd("SET", "f", start)
    assert raw.cmd("INCRBYFLOAT", "f", incr) == result
    assert raw.cmd("GET", "f") == result


def test_incrbyfloat_missing_key_and_ttl(raw):
    assert raw.cmd("INCRBYFLOAT", "f", "3") == b"3"
    assert raw.cmd("INCRBYFLOAT", "f", "1.5") == b"4.5"
    raw.cmd("EXPIRE", "f", "100")
    assert raw.cmd("INCRBYFLOAT", "f", "0.5") == b"5"
    assert 0 < raw.cmd("TTL", "f") <= 100


def test_incrbyfloat_redis_py(r):
    r.set("f", "1.10")
    assert r.incrbyfloat("f", 2.2) == 3.3


def test_incrbyfloat_errors(raw):
    raw.cmd("SET", "f", "abc")
    assert raw.cmd("INCRBYFLOAT", "f", "1") == Err("ERR value is not a valid float")
    raw.cmd("SET", "f", "1")
    assert raw.cmd("INCRBYFLOAT", "f", "x") == Err("ERR value is not a valid float")
    assert raw.cmd("INCRBYFLOAT", "f", "nan") == Err("ERR value is not a valid float")
    assert raw.cmd("INCRBYFLOAT", "f", "inf") == Err("ERR increment would produce NaN or Infinity")
    assert raw.cmd("GET", "f") == b"1"


# -- GETRANGE SUBSTR SETRANGE -----------------------------------------------------

def test_getrange_substr(raw):
    raw.cmd("SET", "s", "Hello World")
    assert raw.cmd("GETRANGE", "s", "0", "4") == b"Hello"
    assert raw.cmd("GETRANGE", "s", "-5", "-1") == b"World"
    assert raw.cmd("GETRANGE", "s", "5", "2") == b""
    assert raw.cmd("GETRANGE", "s", "0", "100") == b"Hello World"
    assert raw.cmd("GETRANGE", "s", "-100", "-50") == b"H"
    assert raw.cmd("GETRANGE", "nokey", "0", "1") == b""
    assert raw.cmd("GETRANGE", "s", "x", "1") == NOT_INT
    assert raw.cmd("SUBSTR", "s", "0", "4") == b"Hello"
    assert raw.cmd("SUBSTR", "s", "-5", "-1") == b"World"


def test_setrange(raw):
    raw.cmd("SET", "s", "Hello World")
    assert raw.cmd("SETRANGE", "s", "6", "Redis") == 11
    assert raw.cmd("GET", "s") == b"Hello Redis"
    assert raw.cmd("SETRANGE", "s", "11", "!") == 12
    assert raw.cmd("SETRANGE", "new", "5", "x") == 6
    assert raw.cmd("GET", "new") == b"\x00\x00\x00\x00\x00x"
    # an empty value on a missing key creates nothing
    assert raw.cmd("SETRANGE", "empty", "0", "") == 0
    assert raw.cmd("SETRANGE", "empty", "3", "") == 0
    assert raw.cmd("EXISTS", "empty") == 0
    assert raw.cmd("SETRANGE", "s", "-1", "x") == Err("ERR offset is out of range")
    assert raw.cmd("SETRANGE", "s", "536870912", "x") == Err(
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)")


# -- bits -------------------------------------------------------------------

def test_setbit_getbit(raw):
    assert raw.cmd("SETBIT", "b", "7", "1") == 0
    assert raw.cmd("GET", "b") == b"\x01"
    assert raw.cmd("SETBIT", "b", "7", "1") == 1
    assert raw.cmd("SETBIT", "b", "7", "0") == 1
    assert raw.cmd("GETBIT", "b", "7") == 0
    assert raw.cmd("SETBIT", "b", "0", "1") == 0
    assert raw.cmd("GET", "b") == b"\x80"
    assert raw.cmd("GETBIT", "b", "0") == 1
    assert raw.cmd("GETBIT", "b", "100") == 0
    assert raw.cmd("GETBIT", "nokey", "0") == 0
    assert raw.cmd("SETBIT", "b", "23", "1") == 0
    assert raw.cmd("STRLEN", "b") == 3


def test_setbit_errors(raw):
    assert raw.cmd("SETBIT", "b", "8", "2") == Err("ERR bit is not an integer or out of range")
    assert raw.cmd("SETBIT", "b", "-1", "1") == Err("ERR bit offset is not an integer or out of range")
    assert raw.cmd("SETBIT", "b", "4294967296", "1") == Err(
        "ERR bit offset is not an integer or out of range")
    assert raw.cmd("GETBIT", "b", "4294967296") == Err(
        "ERR bit offset is not an integer or out of range")
    assert raw.cmd("EXISTS", "b") == 0


def test_bitcount(raw):
    raw.cmd("SET", "k", "foobar")
    assert raw.cmd("BITCOUNT", "k") == 26
    assert raw.cmd("BITCOUNT", "k", "0", "0") == 4
    assert raw.cmd("BITCOUNT", "k", "1", "1") == 6
    assert raw.cmd("BITCOUNT", "k", "-2", "-1") == 7
    assert raw.cmd("BITCOUNT", "k", "1", "1", "BYTE") == 6
    assert raw.cmd("BITCOUNT", "k", "5", "30", "BIT") == 17
    assert raw.cmd("BITCOUNT", "nokey") == 0
    assert raw.cmd("BITCOUNT", "k", "0") == SYNTAX
    assert raw.cmd("BITCOUNT", "k", "0", "-1", "FOO") == SYNTAX
    assert raw.cmd("BITCOUNT", "k", "x", "1") == NOT_INT


def test_bitpos(raw):
    raw.cmd("SET", "k", b"\xff\xf0\x00")
    assert raw.cmd("BITPOS", "k", "0") == 12
    raw.cmd("SET", "k", b"\x00\xff\xf0")
    assert raw.cmd("BITPOS", "k", "1", "0") == 8
    assert raw.cmd("BITPOS", "k", "1", "2") == 16
    assert raw.cmd("BITPOS", "k", "1", "2", "-1", "BYTE") == 16
    assert raw.cmd("BITPOS", "k", "1", "7", "15", "BIT") == 8
    raw.cmd("SET", "k", "abc")
    assert raw.cmd("BITPOS", "k", "1") == 1
    assert raw.cmd("BITPOS", "k", "0") == 0
    assert raw.cmd("BITPOS", "k", "1", "2") == 17
    raw.cmd("SET", "ones", b"\xff\xff")
    assert raw.cmd("BITPOS", "ones", "0") == 16  # past the end when no range is given
    assert raw.cmd("BITPOS", "ones", "0", "0", "-1") == -1
    assert raw.cmd("BITPOS", "nokey", "0") == 0
    assert raw.cmd("BITPOS", "nokey", "1") == -1
    assert raw.cmd("BITPOS", "k", "2") == Err("ERR The bit argument must be 1 or 0.")
    assert raw.cmd("BITPOS", "k", "0", "0", "-1", "FOO") == SYNTAX


def test_bitop(raw):
    raw.cmd("SET", "k1", "foobar")
    raw.cmd("SET", "k2", "abcdef")
    assert raw.cmd("BITOP", "AND", "dest", "k1", "k2") == 6
    assert raw.cmd("GET", "dest") == b"`bc`ab"
    assert raw.cmd("BITOP", "OR", "dest", "k1", "k2") == 6
    assert raw.cmd("GET", "dest") == b"goofev"
    assert raw.cmd("BITOP", "XOR", "dest", "k1", "k2") == 6
    assert raw.cmd("GET", "dest") == bytes(a ^ b for a, b in zip(b"foobar", b"abcdef"))
    assert raw.cmd("BITOP", "NOT", "dest", "k1") == 6
    assert raw.cmd("GET", "dest") == bytes(~b & 0xFF for b in b"foobar")
    raw.cmd("SET", "short", "ab")
    assert raw.cmd("BITOP", "OR", "dest", "k1", "short") == 6
    assert raw.cmd("GET", "dest") == bytes([ord("f") | ord("a"), ord("o") | ord("b")]) + b"obar"
    # every source missing: the destination is deleted
    assert raw.cmd("BITOP", "AND", "dest", "nokey", "nokey2") == 0
    assert raw.cmd("EXISTS", "dest") == 0


def test_bitop_errors(raw):
    raw.cmd("SET", "k", "x")
    assert raw.cmd("BITOP", "FOO", "d", "k") == SYNTAX
    assert raw.cmd("BITOP", "NOT", "d", "k", "k") == Err(
        "ERR BITOP NOT must be called with a single source key.")
    assert raw.cmd("BITOP", "AND", "d") == arity("bitop")


# -- LCS --------------------------------------------------------------------

def test_lcs(raw):
    raw.cmd("MSET", "key1", "ohmytext", "key2", "mynewtext")
    assert raw.cmd("LCS", "key1", "key2") == b"mytext"
    assert raw.cmd("LCS", "key1", "key2", "LEN") == 6
    assert raw.cmd("LCS", "key1", "key2", "IDX") == [
        b"matches", [[[4, 7], [5, 8]], [[2, 3], [0, 1]]], b"len", 6]
    assert raw.cmd("LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN") == [
        b"matches", [[[4, 7], [5, 8], 4]], b"len", 6]
    assert raw.cmd("LCS", "key1", "nokey") == b""
    assert raw.cmd("LCS", "key1", "key2", "IDX", "LEN") == Err(
        "ERR If you want both the length and indexes, please just use IDX.")
    assert raw.cmd("LCS", "key1", "key2", "FOO") == SYNTAX
    assert raw.cmd("LCS", "key1", "key2", "MINMATCHLEN", "x") == NOT_INT
    assert raw.cmd("LCS", "key1") == arity("lcs")
