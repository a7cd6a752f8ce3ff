"""MONITOR: every command of every worker, in Redis 7.0's line format
(`+<secs>.<micros> [<db> <ip:port>] "cmd" "arg" ...`, arguments quoted as
sdscatrepr does), RESET, a second MONITOR, CLIENT LIST's `O` flag.

The behaviour tests run against a real redis-server 7.0 (so the expected
lines are Redis's own) and against a two-worker shoal; the cross-worker
tests run on shoal alone with the monitor and the clients on chosen
workers."""

import re
import time

import pytest

from shoaltest import Err, Server, encode, wait_for

LINE = re.compile(r"(\d+)\.(\d{6}) \[(\d+) ([^\]]+)\] (.*)")


@pytest.fixture(scope="module")
def two():
    s = Server(workers=2).start()
    yield s
    s.stop()


def addr(c):
    """The client's `ip:port` as the server sees it (CLIENT INFO's addr)."""
    info = c.cmd("CLIENT", "INFO")
    info = info.decode() if isinstance(info, bytes) else info
    return re.search(r"\baddr=(\S+)", info).group(1)


def monitor(c):
    assert c.cmd("MONITOR") == "OK"


def line(m):
    """The next MONITOR line as (db, addr, quoted arguments)."""
    before = time.time()
    text = m.reply()
    assert isinstance(text, str), f"not a MONITOR line: {text!r}"
    match = LINE.fullmatch(text)
    assert match, f"not a MONITOR line: {text!r}"
    secs, _, db, who, args = match.groups()
    # the time is the wall clock's, in seconds and microseconds
    assert before - 3600 < int(secs) < time.time() + 3600, text
    return int(db), who, args


def lines_of(m, who, n):
    """The next `n` lines from client `who`, skipping other clients'."""
    out = []
    while len(out) < n:
        db, w, args = line(m)
        if w == who:
            out.append((db, args))
    return out


# ---------------------------------------------------------------------------
# Against Redis and shoal.


def test_line_format_and_order(srv, conns):
    m, c = conns(srv), conns(srv)
    who = addr(c)
    monitor(m)
    assert c.cmd("SET", "key", "a value") == "OK"
    assert c.cmd("GET", "key") == b"a value"
    c.cmd("DEL", "key")
    assert lines_of(m, who, 3) == [(0, '"SET" "key" "a value"'), (0, '"GET" "key"'), (0, '"DEL" "key"')]


def test_arguments_are_quoted_like_redis(srv, conns, redis_ref):
    """Every byte value, quotes, backslashes, spaces and an empty argument,
    as redis-server 7.0 itself writes them (asked on the spot)."""
    args = [bytes(range(256)), b'say "hi"\\', b"", b"tab\tnl\nbell\x07bs\x08", "ünï".encode(), b"12345"]
    want = []
    for server, out in ((redis_ref, want), (srv, None)):
        m, c = server.raw(), server.raw()
        try:
            who = addr(c)
            monitor(m)
            c.cmd("ECHO", args[0])
            c.cmd("MSET", *[x for a in args[1:] for x in (a, a)])
            got = [a for _, a in lines_of(m, who, 2)]
        finally:
            m.close()
            c.close()
        if out is not None:
            out.extend(got)
    assert got == want
    # and what that is, written out for the reader
    assert want[0].startswith('"ECHO" "\\x00\\x01\\x02\\x03\\x04\\x05\\x06\\a\\b\\t\\n\\x0b\\x0c\\r\\x0e')
    assert want[0].endswith(' !\\"#$%&\'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`'
                            'abcdefghijklmnopqrstuvwxyz{|}~\\x7f\\x80' + "".join(
                                f"\\x{b:02x}" for b in range(0x81, 0x100)) + '"')


def test_the_db_of_each_line(srv, conns):
    m, c = conns(srv), conns(srv)
    who = addr(c)
    monitor(m)
    c.cmd("SELECT", 4)
    c.cmd("GET", "k")
    c.cmd("SELECT", 0)
    c.cmd("GET", "k")
    # Redis 7.0 feeds monitors after the command ran: SELECT shows its new db
    assert lines_of(m, who, 4) == [(4, '"SELECT" "4"'), (4, '"GET" "k"'), (0, '"SELECT" "0"'),
                                   (0, '"GET" "k"')]


def test_a_second_monitor_gets_no_reply(srv, conns):
    m = conns(srv)
    who = addr(m)
    monitor(m)
    m.send(encode("MONITOR") + encode("PING"))
    # the monitor sees its own commands after their replies, as in Redis;
    # MONITOR itself is not shown
    assert m.reply() == "PONG"
    assert lines_of(m, who, 1) == [(0, '"PING"')]


def test_client_list_flags(srv, conns):
    m, c = conns(srv), conns(srv)
    mid = m.cmd("CLIENT", "ID")
    monitor(m)

    def flags():
        listing = c.cmd("CLIENT", "LIST").decode()
        return re.search(rf"^id={mid} .*?\bflags=(\S+)", listing, re.M).group(1)

    assert flags() == "O"
    m.cmd("RESET")
    assert flags() == "N"


def test_reset_ends_monitoring(srv, conns):
    m, witness, c = conns(srv), conns(srv), conns(srv)
    who = addr(c)
    monitor(m)
    monitor(witness)
    c.cmd("GET", "before")
    assert lines_of(m, who, 1) == [(0, '"GET" "before"')]
    # RESET's reply is the last thing a monitor gets
    assert m.cmd("RESET") == "RESET"
    assert m.cmd("PING") == "PONG"
    c.cmd("GET", "after")
    # the witness got the line, so a monitor would have had it by now
    assert lines_of(witness, who, 2) == [(0, '"GET" "before"'), (0, '"GET" "after"')]
    assert m.cmd("PING") == "PONG"
    assert m.cmd("ECHO", "no line before me") == b"no line before me"


def test_rejected_commands_are_not_shown(srv, conns):
    """Redis feeds monitors from call(): a command refused before it runs
    (wrong arity, unknown, refused in subscribed mode) has no line."""
    m, c, s = conns(srv), conns(srv), conns(srv)
    who, swho = addr(c), addr(s)
    monitor(m)
    assert isinstance(c.cmd("GET"), Err)
    assert isinstance(c.cmd("NOSUCHCOMMAND", "x"), Err)
    c.cmd("GET", "marker")
    assert lines_of(m, who, 1) == [(0, '"GET" "marker"')]
    assert s.cmd("SUBSCRIBE", "ch") == [b"subscribe", b"ch", 1]
    assert isinstance(s.cmd("GET", "x"), Err)
    assert s.cmd("UNSUBSCRIBE") == [b"unsubscribe", b"ch", 0]
    assert lines_of(m, swho, 2) == [(0, '"SUBSCRIBE" "ch"'), (0, '"UNSUBSCRIBE"')]


def test_queued_commands_show_when_they_run(srv, conns):
    """A command queued in MULTI shows when EXEC runs it, after the MULTI
    and before the EXEC; DISCARD drops it unseen."""
    m, c, other = conns(srv), conns(srv), conns(srv)
    who, owho = addr(c), addr(other)
    monitor(m)
    assert c.pipeline(("MULTI",), ("INCR", "n"), ("SET", "x", "1")) == ["OK", "QUEUED", "QUEUED"]
    other.cmd("GET", "between")
    assert c.cmd("EXEC") == [1, "OK"]
    seen = []
    while len(seen) < 5:
        _, w, args = line(m)
        if w in (who, owho):
            seen.append((w, args))
    assert seen == [(who, '"MULTI"'), (owho, '"GET" "between"'), (who, '"INCR" "n"'),
                    (who, '"SET" "x" "1"'), (who, '"EXEC"')]
    assert c.pipeline(("MULTI",), ("INCR", "never"), ("DISCARD",)) == ["OK", "QUEUED", "OK"]
    c.cmd("GET", "marker")
    assert lines_of(m, who, 3) == [(0, '"MULTI"'), (0, '"DISCARD"'), (0, '"GET" "marker"')]


@pytest.mark.parametrize("cmd", [("CONFIG", "GET", "maxmemory"), ("CLIENT", "LIST"),
                                 ("CLIENT", "KILL", "ID", "999999")], ids=lambda c: " ".join(c[:2]))
def test_admin_commands_are_not_shown(srv, conns, cmd):
    m, c = conns(srv), conns(srv)
    who = addr(c)
    monitor(m)
    c.cmd(*cmd)
    c.cmd("GET", "marker")
    assert lines_of(m, who, 1) == [(0, '"GET" "marker"')]


def test_hello_auth_is_redacted(srv, conns):
    m, c = conns(srv), conns(srv)
    who = addr(c)
    monitor(m)
    # Redis's default user takes any password; the reply does not matter
    c.cmd("HELLO", "2", "AUTH", "default", "secret", "SETNAME", "n")
    assert lines_of(m, who, 1) == [(0, '"HELLO" "2" "AUTH" "(redacted)" "(redacted)" "SETNAME" "n"')]


def test_a_monitor_cannot_touch_the_keyspace(srv, conns):
    """Redis treats a MONITOR client as a replica."""
    m = conns(srv)
    monitor(m)
    assert m.cmd("SET", "k", "v") == Err("ERR Replica can't interact with the keyspace")
    assert m.cmd("GET", "k") == Err("ERR Replica can't interact with the keyspace")


def test_monitor_inside_multi_is_refused(srv, conns):
    c = conns(srv)
    assert c.cmd("MULTI") == "OK"
    assert c.cmd("MONITOR") == "QUEUED"
    assert c.cmd("EXEC") == [Err("ERR MONITOR isn't allowed for DENY BLOCKING client")]
    assert c.cmd("PING") == "PONG"


def test_resp3_monitor_lines_are_simple_strings(srv, conns):
    m, c = conns(srv), conns(srv)
    who = addr(c)
    assert isinstance(m.cmd("HELLO", "3"), dict)
    monitor(m)
    c.cmd("GET", "k3")
    assert lines_of(m, who, 1) == [(0, '"GET" "k3"')]


# ---------------------------------------------------------------------------
# Across workers (shoal).


@pytest.mark.shoal_only
@pytest.mark.parametrize("monitor_slot", [0, 1])
def test_a_monitor_sees_the_commands_of_both_workers(two, conns, monitor_slot):
    m = conns(two, monitor_slot)
    c0, c1 = conns(two, 0), conns(two, 1)
    who0, who1 = addr(c0), addr(c1)
    c1.cmd("SELECT", 2)
    monitor(m)
    c1.cmd("SET", "from", "worker 1")
    c1.cmd("INCR", "n")
    assert lines_of(m, who1, 2) == [(2, '"SET" "from" "worker 1"'), (2, '"INCR" "n"')]
    c0.cmd("GET", "from")
    assert lines_of(m, who0, 1) == [(0, '"GET" "from"')]


@pytest.mark.shoal_only
def test_many_commands_from_the_other_worker_arrive_in_order(two, conns):
    m, c = conns(two, 0), conns(two, 1)
    who = addr(c)
    monitor(m)
    n = 2000
    for start in range(0, n, 200):
        c.pipeline(*[("SET", f"k{i}", str(i)) for i in range(start, start + 200)])
    assert lines_of(m, who, n) == [(0, f'"SET" "k{i}" "{i}"') for i in range(n)]


@pytest.mark.shoal_only
def test_monitors_on_both_workers_and_a_closed_one(two, conns):
    m0, m1, c = conns(two, 0), conns(two, 1), conns(two, 1)
    who = addr(c)
    monitor(m0)
    monitor(m1)
    c.cmd("GET", "both")
    for m in (m0, m1):
        assert lines_of(m, who, 1) == [(0, '"GET" "both"')]
    m1.close()
    c.cmd("GET", "only m0")
    assert lines_of(m0, who, 1) == [(0, '"GET" "only m0"')]
    # a closed monitor is not in CLIENT LIST any more
    wait_for(lambda: c.cmd("CLIENT", "LIST").decode().count("flags=O") == 1,
             what="one monitor left in CLIENT LIST")
