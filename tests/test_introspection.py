"""Introspection details Redis's own suite does not pin: CLUSTER on a
standalone server, how INFO commandstats/errorstats count blocked commands
that end without being served and the INFO call that asks, and MONITOR's
lines for EVALSHA and the commands its script runs.

Each test runs against a real redis-server 7.0 (the expected replies are
Redis's own) and against a two-worker shoal."""

import re

import pytest

from shoaltest import Err

LINE = re.compile(r"\d+\.\d{6} \[(\d+) ([^\]]+)\] (.*)")


def commandstats(c):
    """INFO commandstats as {command: {field: value}}."""
    text = c.cmd("INFO", "commandstats")
    text = text.decode() if isinstance(text, bytes) else text
    stats = {}
    for line in text.split("\r\n"):
        if line.startswith("cmdstat_"):
            name, _, fields = line[len("cmdstat_"):].partition(":")
            stats[name] = dict(f.split("=") for f in fields.split(","))
    return stats


def errorstats(c):
    """INFO errorstats as {error prefix: count}."""
    text = c.cmd("INFO", "errorstats")
    text = text.decode() if isinstance(text, bytes) else text
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"errorstat_(\S+):count=(\d+)", text)
    }


def test_cluster_answers_as_a_standalone_server(srv, conns):
    c = conns(srv)
    for args in [("CLUSTER", "INFO"), ("CLUSTER", "HELP"), ("CLUSTER", "KEYSLOT", "k")]:
        reply = c.cmd(*args)
        assert isinstance(reply, Err), (args, reply)
        assert reply == "ERR This instance has cluster support disabled", args
    listed = c.cmd("COMMAND", "LIST", "FILTERBY", "PATTERN", "cluster|h*")
    assert [n.decode() if isinstance(n, bytes) else n for n in listed] == ["cluster|help"]


def test_info_does_not_count_the_call_that_asks(srv, conns):
    c = conns(srv)
    assert c.cmd("CONFIG", "RESETSTAT") == "OK"
    first = commandstats(c)
    assert "info" not in first
    assert first["config|resetstat"]["calls"] == "1"
    assert commandstats(c)["info"]["calls"] == "1"


def test_a_blocked_call_that_times_out_counts_once(srv, conns):
    c = conns(srv)
    assert c.cmd("CONFIG", "RESETSTAT") == "OK"
    assert c.cmd("BLPOP", "introspection:nothing", "0.05") is None
    blpop = commandstats(c)["blpop"]
    assert (blpop["calls"], blpop["failed_calls"], blpop["rejected_calls"]) == ("1", "0", "0")


def test_client_unblock_error_is_a_failed_call(srv, conns):
    c, blocked = conns(srv), conns(srv)
    assert c.cmd("CONFIG", "RESETSTAT") == "OK"
    blocked_id = blocked.cmd("CLIENT", "ID")
    blocked.send(b"*3\r\n$5\r\nBLPOP\r\n$20\r\nintrospection:nolist\r\n$1\r\n0\r\n")
    for _ in range(200):
        if c.cmd("CLIENT", "UNBLOCK", blocked_id, "ERROR") == 1:
            break
    reply = blocked.reply()
    assert reply == Err("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    blpop = commandstats(c)["blpop"]
    assert (blpop["calls"], blpop["failed_calls"]) == ("1", "1")
    assert errorstats(c).get("UNBLOCKED") == 1


def test_monitor_shows_evalsha_before_its_script_commands(srv, conns):
    m, c = conns(srv), conns(srv)
    sha = c.cmd("SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])")
    assert m.cmd("MONITOR") == "OK"
    assert c.cmd("EVALSHA", sha, "1", "introspection:counter") >= 1
    lines = []
    while len(lines) < 2:
        match = LINE.fullmatch(m.reply())
        assert match
        lines.append(match.groups())
    (db1, who1, args1), (db2, who2, args2) = lines
    assert args1.lower().startswith('"evalsha"'), args1
    assert who1 != "lua"
    assert (who2, args2) == ("lua", '"incr" "introspection:counter"')
    assert db1 == db2


def test_maxclients_counts_every_workers_clients(make_server, conns):
    s = make_server(workers=2, extra_args=["--maxclients", "4"])
    admitted, refused = [], None
    for _ in range(12):
        c = conns(s)
        reply = c.cmd("PING")
        if isinstance(reply, Err):
            refused = reply
            break
        admitted.append(c)
    assert refused == "ERR max number of clients reached"
    assert len(admitted) == 4
