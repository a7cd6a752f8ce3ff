"""Blocking commands end to end (BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP BZPOPMIN
BZPOPMAX BZMPOP): data already there, a timeout that replies nil, a client
woken by a write from another connection, FIFO order among waiters, a key
given twice, wrong types, bad timeouts, and the non-blocking behaviour inside
MULTI; each reply as redis-server 7.0 sends it.

A waiter sends its command on a raw connection without reading the reply;
the test waits until the server lists that client as blocked (CLIENT LIST ID
<id> shows `b` in its flags, as Redis does) and only then writes from another
connection. Nothing here measures time: a waiter that must stay blocked is
shown to be by the reply it gets later."""

import threading

import pytest

from shoaltest import Err, Map, encode, wait_for

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")
SYNTAX = Err("ERR syntax error")
NEGATIVE = Err("ERR timeout is negative")
NOT_FLOAT = Err("ERR timeout is not a float or out of range")


def arity(cmd):
    return Err(f"ERR wrong number of arguments for '{cmd}' command")


def raw_reply(c, *args):
    c.send(encode(*args))
    return c.reply_bytes()


@pytest.fixture
def conn(server, r):
    """Opens more raw connections to the emptied shared server; all are
    closed at teardown."""
    opened = []

    def make():
        c = server.raw()
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.close()


def is_blocked(ctl, client_id):
    line = ctl.cmd("CLIENT", "LIST", "ID", str(client_id)).decode()
    for field in line.split():
        if field.startswith("flags="):
            return "b" in field[len("flags="):]
    return False


def block(ctl, waiter, *args):
    """Sends a blocking command on `waiter` and returns once the server has
    it blocked."""
    cid = waiter.cmd("CLIENT", "ID")
    waiter.send(encode(*args))
    wait_for(lambda: is_blocked(ctl, cid), what=f"{args[0]} to block")


# -- data already there ---------------------------------------------------------------

def test_blpop_brpop_immediate(raw):
    raw.cmd("RPUSH", "l2", "a", "b", "c")
    assert raw.cmd("BLPOP", "l1", "l2", "0") == [b"l2", b"a"]
    assert raw.cmd("BRPOP", "l1", "l2", "0") == [b"l2", b"c"]
    raw.cmd("RPUSH", "l1", "x")
    assert raw.cmd("BRPOP", "l2", "l1", "0.1") == [b"l2", b"b"]  # the first non-empty key
    assert raw.cmd("EXISTS", "l2") == 0
    assert raw.cmd("BLPOP", "l2", "l1", "1") == [b"l1", b"x"]
    assert raw.cmd("EXISTS", "l1") == 0


def test_blmove_brpoplpush_immediate(raw):
    raw.cmd("RPUSH", "src", "a", "b", "c")
    assert raw.cmd("BLMOVE", "src", "dst", "LEFT", "RIGHT", "0") == b"a"
    assert raw.cmd("BLMOVE", "src", "dst", "RIGHT", "LEFT", "0.1") == b"c"
    assert raw.cmd("BRPOPLPUSH", "src", "dst", "0") == b"b"
    assert raw.cmd("EXISTS", "src") == 0
    assert raw.cmd("LRANGE", "dst", "0", "-1") == [b"b", b"c", b"a"]
    assert raw.cmd("BLMOVE", "dst", "dst", "LEFT", "RIGHT", "0") == b"b"
    assert raw.cmd("LRANGE", "dst", "0", "-1") == [b"c", b"a", b"b"]


def test_blmpop_immediate(raw):
    raw.cmd("RPUSH", "l2", "a", "b", "c")
    assert raw.cmd("BLMPOP", "0", "2", "l1", "l2", "LEFT") == [b"l2", [b"a"]]
    assert raw.cmd("BLMPOP", "0.1", "2", "l1", "l2", "RIGHT", "COUNT", "5") == [b"l2", [b"c", b"b"]]
    assert raw.cmd("EXISTS", "l2") == 0


def test_bzpop_immediate(raw):
    raw.cmd("ZADD", "z", "1", "a", "2.5", "b", "3", "c")
    assert raw.cmd("BZPOPMIN", "nokey", "z", "0") == [b"z", b"a", b"1"]
    assert raw.cmd("BZPOPMAX", "z", "0.1") == [b"z", b"c", b"3"]
    assert raw.cmd("BZMPOP", "0", "2", "nokey", "z", "MIN", "COUNT", "5") == [
        b"z", [[b"b", b"2.5"]]]
    assert raw.cmd("EXISTS", "z") == 0
    raw.cmd("ZADD", "z", "1", "a", "2", "b")
    assert raw.cmd("BZMPOP", "0", "1", "z", "MAX") == [b"z", [[b"b", b"2"]]]


# -- timeouts ---------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["BLPOP", "l", "0.1"], ["BRPOP", "l1", "l2", "0.1"],
    ["BLMOVE", "l", "d", "LEFT", "RIGHT", "0.1"], ["BRPOPLPUSH", "l", "d", "0.1"],
    ["BLMPOP", "0.1", "1", "l", "LEFT"], ["BZPOPMIN", "z", "0.1"], ["BZPOPMAX", "z", "0.1"],
    ["BZMPOP", "0.1", "2", "z", "z2", "MIN", "COUNT", "3"],
])
def test_timeout_replies_null_array(raw, args):
    # every one, BLMOVE and BRPOPLPUSH included, times out with a null array
    assert raw_reply(raw, *args) == b"*-1\r\n"
    assert raw.cmd("DBSIZE") == 0
    assert raw.cmd("PING") == "PONG"  # the connection goes on


def test_timeout_resp3_null(raw):
    assert isinstance(raw.cmd("HELLO", "3"), Map)
    assert raw_reply(raw, "BLPOP", "l", "0.1") == b"_\r\n"
    assert raw_reply(raw, "BLMOVE", "l", "d", "LEFT", "LEFT", "0.1") == b"_\r\n"
    assert raw_reply(raw, "BZPOPMIN", "z", "0.1") == b"_\r\n"
    assert raw_reply(raw, "BZMPOP", "0.1", "1", "z", "MIN") == b"_\r\n"
    raw.cmd("ZADD", "z", "1.5", "a")
    assert raw_reply(raw, "BZPOPMIN", "z", "0") == b"*3\r\n$1\r\nz\r\n$1\r\na\r\n,1.5\r\n"


def test_push_after_timeout_is_kept(raw, conn):
    assert raw.cmd("BLPOP", "l", "0.1") is None
    other = conn()
    assert other.cmd("RPUSH", "l", "x") == 1
    assert raw.cmd("LRANGE", "l", "0", "-1") == [b"x"]


@pytest.mark.parametrize("cmd", [
    ["BLPOP", "l"], ["BRPOP", "l"], ["BLMOVE", "l", "d", "LEFT", "LEFT"], ["BRPOPLPUSH", "l", "d"],
    ["BZPOPMIN", "z"], ["BZPOPMAX", "z"],
])
def test_bad_timeouts(raw, cmd):
    for t in ("-1", "-0.5", "-inf"):
        assert raw.cmd(*cmd, t) == NEGATIVE, t
    for t in ("x", "0.1x", "", "nan", "1,5"):
        assert raw.cmd(*cmd, t) == NOT_FLOAT, t
    assert raw.cmd("DBSIZE") == 0


def test_bad_timeouts_mpop(raw):
    for cmd in (["BLMPOP"], ["BZMPOP"]):
        where = "LEFT" if cmd[0] == "BLMPOP" else "MIN"
        assert raw.cmd(*cmd, "-1", "1", "k", where) == NEGATIVE
        assert raw.cmd(*cmd, "x", "1", "k", where) == NOT_FLOAT
        assert raw.cmd(*cmd, "0", "0", "k", where) == Err("ERR numkeys should be greater than 0")
        assert raw.cmd(*cmd, "0", "1", "k", "FOO") == SYNTAX
        assert raw.cmd(*cmd, "0", "2", "k", where) == SYNTAX
        assert raw.cmd(*cmd, "0", "1", "k", where, "COUNT", "0") == Err(
            "ERR count should be greater than 0")
        assert raw.cmd(*cmd, "0", "1", "k") == arity(cmd[0].lower())


def test_blocking_arity_and_syntax(raw):
    assert raw.cmd("BLPOP", "l") == arity("blpop")
    assert raw.cmd("BRPOP") == arity("brpop")
    assert raw.cmd("BLMOVE", "l", "d", "LEFT", "0") == arity("blmove")
    assert raw.cmd("BLMOVE", "l", "d", "UP", "LEFT", "0") == SYNTAX
    assert raw.cmd("BRPOPLPUSH", "l", "0") == arity("brpoplpush")
    assert raw.cmd("BZPOPMIN", "z") == arity("bzpopmin")
    assert raw.cmd("BZPOPMAX") == arity("bzpopmax")


# -- wrong types ------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["BLPOP", "s", "0"], ["BRPOP", "nokey", "s", "0"], ["BLMOVE", "s", "d", "LEFT", "LEFT", "0"],
    ["BRPOPLPUSH", "s", "d", "0"], ["BLMPOP", "0", "2", "nokey", "s", "LEFT"],
    ["BZPOPMIN", "s", "0"], ["BZPOPMAX", "nokey", "s", "0"], ["BZMPOP", "0", "1", "s", "MIN"],
])
def test_wrongtype_is_immediate(raw, args):
    raw.cmd("SET", "s", "v")
    assert raw.cmd(*args) == WRONGTYPE
    assert raw.cmd("GET", "s") == b"v"


def test_blmove_wrongtype_destination(raw):
    raw.cmd("SET", "s", "v")
    raw.cmd("RPUSH", "l", "a")
    assert raw.cmd("BLMOVE", "l", "s", "LEFT", "LEFT", "0") == WRONGTYPE
    assert raw.cmd("BRPOPLPUSH", "l", "s", "0") == WRONGTYPE
    assert raw.cmd("LRANGE", "l", "0", "-1") == [b"a"]
    # the destination is not looked at while the source is empty
    assert raw.cmd("BLMOVE", "nokey", "s", "LEFT", "LEFT", "0.1") is None


def test_zset_commands_reject_lists_and_list_commands_reject_zsets(raw):
    raw.cmd("RPUSH", "l", "a")
    raw.cmd("ZADD", "z", "1", "a")
    assert raw.cmd("BZPOPMIN", "l", "0") == WRONGTYPE
    assert raw.cmd("BLPOP", "z", "0") == WRONGTYPE


# -- woken by another connection ---------------------------------------------------------

def test_blpop_woken_by_rpush(raw, conn):
    waiter = conn()
    block(raw, waiter, "BLPOP", "l", "0")
    assert raw.cmd("RPUSH", "l", "x") == 1  # the length before the waiter is served
    assert waiter.reply() == [b"l", b"x"]
    assert raw.cmd("EXISTS", "l") == 0
    assert waiter.cmd("PING") == "PONG"


@pytest.mark.parametrize("how", ["rename", "renamenx", "copy", "move"])
def test_blpop_woken_by_a_key_that_arrives_whole(raw, conn, how):
    # Redis's dbAdd signals every key it adds: RENAME, COPY and MOVE serve
    # clients blocked on the destination.
    waiter = conn()
    block(raw, waiter, "BLPOP", "dst", "0")
    if how == "move":
        raw.cmd("SELECT", "1")
        raw.cmd("RPUSH", "dst", "a", "b")
        assert raw.cmd("MOVE", "dst", "0") == 1
        raw.cmd("SELECT", "0")
    else:
        raw.cmd("RPUSH", "src", "a", "b")
        if how == "copy":
            assert raw.cmd("COPY", "src", "dst") == 1
        elif how == "renamenx":
            assert raw.cmd("RENAMENX", "src", "dst") == 1
        else:
            assert raw.cmd("RENAME", "src", "dst") == "OK"
    assert waiter.reply() == [b"dst", b"a"]
    assert raw.cmd("LRANGE", "dst", "0", "-1") == [b"b"]


def test_blpop_takes_the_head_after_the_whole_push(raw, conn):
    waiter = conn()
    block(raw, waiter, "BLPOP", "l", "0")
    assert raw.cmd("LPUSH", "l", "a", "b", "c") == 3
    assert waiter.reply() == [b"l", b"c"]
    assert raw.cmd("LRANGE", "l", "0", "-1") == [b"b", b"a"]
    raw.cmd("DEL", "l")
    block(raw, waiter, "BRPOP", "l", "0")
    assert raw.cmd("RPUSH", "l", "a", "b", "c") == 3
    assert waiter.reply() == [b"l", b"c"]
    assert raw.cmd("LRANGE", "l", "0", "-1") == [b"a", b"b"]


def test_woken_on_the_key_that_got_data(raw, conn):
    waiter = conn()
    block(raw, waiter, "BRPOP", "a", "b", "c", "0")
    raw.cmd("RPUSH", "c", "z")
    assert waiter.reply() == [b"c", b"z"]


def test_blpop_with_timeout_woken_before_it(raw, conn):
    waiter = conn()
    block(raw, waiter, "BLPOP", "l", "30")
    raw.cmd("RPUSH", "l", "x")
    assert waiter.reply() == [b"l", b"x"]


def test_blmove_woken(raw, conn):
    waiter = conn()
    raw.cmd("RPUSH", "dst", "old")
    block(raw, waiter, "BLMOVE", "src", "dst", "RIGHT", "LEFT", "0")
    assert raw.cmd("RPUSH", "src", "a", "b") == 2
    assert waiter.reply() == b"b"
    assert raw.cmd("LRANGE", "src", "0", "-1") == [b"a"]
    assert raw.cmd("LRANGE", "dst", "0", "-1") == [b"b", b"old"]


def test_brpoplpush_woken(raw, conn):
    waiter = conn()
    block(raw, waiter, "BRPOPLPUSH", "src", "dst", "0")
    raw.cmd("LPUSH", "src", "x")
    assert waiter.reply() == b"x"
    assert raw.cmd("EXISTS", "src") == 0
    assert raw.cmd("LRANGE", "dst", "0", "-1") == [b"x"]


def test_blmove_woken_wrongtype_destination(raw, conn):
    waiter = conn()
    raw.cmd("SET", "dst", "v")
    block(raw, waiter, "BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")
    raw.cmd("RPUSH", "src", "x")
    assert waiter.reply() == WRONGTYPE
    assert raw.cmd("LRANGE", "src", "0", "-1") == [b"x"]  # nothing lost
    assert raw.cmd("GET", "dst") == b"v"


def test_blmove_chain_wakes_the_next_waiter(raw, conn):
    mover, popper = conn(), conn()
    block(raw, mover, "BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")
    block(raw, popper, "BLPOP", "dst", "0")
    raw.cmd("RPUSH", "src", "v")
    assert mover.reply() == b"v"
    assert popper.reply() == [b"dst", b"v"]
    assert raw.cmd("EXISTS", "src", "dst") == 0


def test_blmpop_woken(raw, conn):
    waiter = conn()
    block(raw, waiter, "BLMPOP", "0", "2", "l1", "l2", "LEFT", "COUNT", "2")
    assert raw.cmd("RPUSH", "l2", "a", "b", "c") == 3
    assert waiter.reply() == [b"l2", [b"a", b"b"]]
    assert raw.cmd("LRANGE", "l2", "0", "-1") == [b"c"]


def test_bzpopmin_bzpopmax_woken(raw, conn):
    waiter = conn()
    block(raw, waiter, "BZPOPMIN", "z", "0")
    assert raw.cmd("ZADD", "z", "2", "b", "1.5", "a") == 2
    assert waiter.reply() == [b"z", b"a", b"1.5"]
    raw.cmd("DEL", "z")
    block(raw, waiter, "BZPOPMAX", "z1", "z2", "0")
    raw.cmd("ZADD", "z2", "1", "a", "0.1", "b")
    assert waiter.reply() == [b"z2", b"a", b"1"]
    assert raw.cmd("ZRANGE", "z2", "0", "-1", "WITHSCORES") == [b"b", b"0.10000000000000001"]


def test_bzmpop_woken(raw, conn):
    waiter = conn()
    block(raw, waiter, "BZMPOP", "0", "1", "z", "MAX", "COUNT", "2")
    raw.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert waiter.reply() == [b"z", [[b"c", b"3"], [b"b", b"2"]]]
    assert raw.cmd("ZRANGE", "z", "0", "-1") == [b"a"]


def test_woken_by_lmove_into_the_key(raw, conn):
    waiter = conn()
    raw.cmd("RPUSH", "src", "x")
    block(raw, waiter, "BLPOP", "dst", "0")
    assert raw.cmd("LMOVE", "src", "dst", "LEFT", "LEFT") == b"x"
    assert waiter.reply() == [b"dst", b"x"]


def test_served_after_the_whole_transaction(raw, conn):
    waiter = conn()
    block(raw, waiter, "BLPOP", "l", "0")
    assert raw.cmd("MULTI") == "OK"
    raw.cmd("RPUSH", "l", "a")
    raw.cmd("RPUSH", "l", "b")
    raw.cmd("LPOP", "l")
    assert raw.cmd("EXEC") == [1, 2, b"a"]
    assert waiter.reply() == [b"l", b"b"]
    assert raw.cmd("EXISTS", "l") == 0


def test_not_woken_by_other_db_or_other_type(raw, conn):
    waiter = conn()
    block(raw, waiter, "BLPOP", "k", "0")
    raw.cmd("SELECT", "1")
    raw.cmd("RPUSH", "k", "in-db1")
    raw.cmd("SELECT", "0")
    raw.cmd("SET", "k", "string")  # the key exists but is no list: still blocked
    raw.cmd("DEL", "k")
    raw.cmd("RPUSH", "k", "in-db0")
    assert waiter.reply() == [b"k", b"in-db0"]
    raw.cmd("SELECT", "1")
    assert raw.cmd("LRANGE", "k", "0", "-1") == [b"in-db1"]


def test_bzpop_not_woken_by_a_list(raw, conn):
    waiter = conn()
    block(raw, waiter, "BZPOPMIN", "z", "0")
    raw.cmd("RPUSH", "z", "x")
    raw.cmd("DEL", "z")
    raw.cmd("ZADD", "z", "1", "m")
    assert waiter.reply() == [b"z", b"m", b"1"]


def test_closed_waiter_takes_nothing(raw, conn):
    gone = conn()
    gone_id = gone.cmd("CLIENT", "ID")
    block(raw, gone, "BLPOP", "l", "0")
    gone.close()
    # once the server has seen the close, a push stays in the list
    wait_for(lambda: raw.cmd("CLIENT", "LIST", "ID", str(gone_id)) == b"",
             what="the closed waiter to go")
    assert raw.cmd("RPUSH", "l", "x") == 1
    assert raw.cmd("LRANGE", "l", "0", "-1") == [b"x"]


# -- FIFO, several waiters, key given twice --------------------------------------------------

def test_fifo_among_waiters(raw, conn):
    first, second = conn(), conn()
    block(raw, first, "BLPOP", "l", "0")
    block(raw, second, "BLPOP", "l", "0")
    raw.cmd("RPUSH", "l", "x")
    raw.cmd("RPUSH", "l", "y")
    assert first.reply() == [b"l", b"x"]
    assert second.reply() == [b"l", b"y"]


def test_fifo_one_push_serves_two(raw, conn):
    first, second, third = conn(), conn(), conn()
    block(raw, first, "BRPOP", "l", "0")
    block(raw, second, "BLPOP", "l", "0")
    block(raw, third, "BLPOP", "l", "0")
    assert raw.cmd("RPUSH", "l", "a", "b") == 2
    assert first.reply() == [b"l", b"b"]
    assert second.reply() == [b"l", b"a"]
    raw.cmd("RPUSH", "l", "c")
    assert third.reply() == [b"l", b"c"]


def test_fifo_zset_waiters(raw, conn):
    first, second = conn(), conn()
    block(raw, first, "BZPOPMIN", "z", "0")
    block(raw, second, "BZPOPMAX", "z", "0")
    raw.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert first.reply() == [b"z", b"a", b"1"]
    assert second.reply() == [b"z", b"c", b"3"]
    assert raw.cmd("ZRANGE", "z", "0", "-1") == [b"b"]


def test_key_given_twice(raw, conn):
    waiter = conn()
    block(raw, waiter, "BLPOP", "k", "k", "0")
    raw.cmd("RPUSH", "k", "x", "y")
    assert waiter.reply() == [b"k", b"x"]  # served once
    assert raw.cmd("LRANGE", "k", "0", "-1") == [b"y"]
    block(raw, waiter, "BZPOPMIN", "z", "z", "0")
    raw.cmd("ZADD", "z", "1", "a", "2", "b")
    assert waiter.reply() == [b"z", b"a", b"1"]
    assert raw.cmd("ZCARD", "z") == 1
    block(raw, waiter, "BLMPOP", "0", "2", "m", "m", "LEFT", "COUNT", "5")
    raw.cmd("RPUSH", "m", "1", "2")
    assert waiter.reply() == [b"m", [b"1", b"2"]]
    assert raw.cmd("EXISTS", "m") == 0


def test_waiters_on_different_keys(raw, conn):
    wa, wb = conn(), conn()
    block(raw, wa, "BLPOP", "a", "0")
    block(raw, wb, "BLPOP", "b", "0")
    raw.cmd("RPUSH", "b", "for-b")
    assert wb.reply() == [b"b", b"for-b"]
    raw.cmd("RPUSH", "a", "for-a")
    assert wa.reply() == [b"a", b"for-a"]


# -- inside MULTI -----------------------------------------------------------------

def test_blocking_commands_inside_multi_do_not_block(raw):
    assert raw.cmd("MULTI") == "OK"
    for args in (["BLPOP", "nokey", "0"], ["BRPOP", "nokey", "0"],
                 ["BLMOVE", "nokey", "d", "LEFT", "LEFT", "0"], ["BRPOPLPUSH", "nokey", "d", "0"],
                 ["BLMPOP", "0", "1", "nokey", "LEFT"], ["BZPOPMIN", "nokey", "0"],
                 ["BZPOPMAX", "nokey", "0"], ["BZMPOP", "0", "1", "nokey", "MIN"]):
        assert raw.cmd(*args) == "QUEUED"
    # a null array each, except BLMOVE and BRPOPLPUSH: a null bulk string
    assert raw_reply(raw, "EXEC") == (
        b"*8\r\n*-1\r\n*-1\r\n$-1\r\n$-1\r\n*-1\r\n*-1\r\n*-1\r\n*-1\r\n")
    assert raw.cmd("DBSIZE") == 0


def test_blocking_commands_inside_multi_with_data(raw):
    raw.cmd("RPUSH", "l", "a", "b")
    raw.cmd("ZADD", "z", "1", "m")
    raw.cmd("MULTI")
    raw.cmd("BLPOP", "l", "0")
    raw.cmd("BLMOVE", "l", "d", "LEFT", "LEFT", "0")
    raw.cmd("BLPOP", "l", "0")
    raw.cmd("BZPOPMIN", "z", "0")
    raw.cmd("BLPOP", "nokey", "-1")
    assert raw.cmd("EXEC") == [[b"l", b"a"], b"b", None, [b"z", b"m", b"1"], NEGATIVE]
    assert raw.cmd("LRANGE", "d", "0", "-1") == [b"b"]


# -- redis-py ---------------------------------------------------------------------

def test_redis_py_blocking(r, server):
    assert r.blpop(["a", "b"], timeout=0.1) is None
    r.rpush("b", "x")
    assert tuple(r.blpop(["a", "b"], timeout=0)) == ("b", "x")
    r.zadd("z", {"m": 2.5})
    assert tuple(r.bzpopmax("z", timeout=0)) == ("z", "m", 2.5)
    assert r.blmove("nokey", "d", 0.1) is None

    got = []
    other = server.client()
    t = threading.Thread(target=lambda: got.append(other.brpop("q", timeout=0)), daemon=True)
    t.start()
    try:
        wait_for(lambda: any(c.get("cmd") == "brpop" and "b" in c.get("flags", "")
                             for c in r.client_list()),
                 what="the thread's BRPOP to block")
        r.rpush("q", "hello")
        t.join(10)
        assert not t.is_alive()
        assert tuple(got[0]) == ("q", "hello")
    finally:
        other.close()
