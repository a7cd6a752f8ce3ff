"""Connection commands end to end: PING, ECHO, QUIT, SELECT, HELLO, RESET and
CLIENT (SETNAME GETNAME ID INFO LIST KILL NO-EVICT REPLY), with Redis 7.0's
exact replies and error strings."""

import re
import time

import pytest

from shoaltest import Err, Map


def client_field(info, field):
    m = re.search(rf"(?:^| ){field}=(\S*)", info)
    assert m, f"{field}= missing in {info!r}"
    return m.group(1)


def test_ping(raw):
    assert raw.cmd("PING") == "PONG"
    assert raw.cmd("PING", "hello") == b"hello"
    assert raw.cmd("PING", "a", "b") == Err("ERR wrong number of arguments for 'ping' command")


def test_ping_redis_py(r):
    assert r.ping() is True


def test_echo(raw):
    assert raw.cmd("ECHO", "hi there") == b"hi there"
    assert raw.cmd("ECHO", b"\x00\xff\r\n") == b"\x00\xff\r\n"
    assert raw.cmd("ECHO", "") == b""
    assert raw.cmd("ECHO") == Err("ERR wrong number of arguments for 'echo' command")


def test_unknown_command(raw):
    assert raw.cmd("NOSUCHCMD", "a", "b") == Err(
        "ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b' ")


def test_quit_replies_ok_and_closes(raw):
    assert raw.cmd("QUIT") == "OK"
    data, closed = raw.read_all()
    assert data == b"" and closed


def test_select(raw):
    assert raw.cmd("SET", "k", "db0") == "OK"
    assert raw.cmd("SELECT", "1") == "OK"
    assert raw.cmd("GET", "k") is None
    assert raw.cmd("SET", "k", "db1") == "OK"
    assert raw.cmd("SELECT", "15") == "OK"
    assert raw.cmd("GET", "k") is None
    assert raw.cmd("SELECT", "0") == "OK"
    assert raw.cmd("GET", "k") == b"db0"
    assert raw.cmd("SELECT", "1") == "OK"
    assert raw.cmd("GET", "k") == b"db1"


def test_select_errors(raw):
    assert raw.cmd("SELECT", "16") == Err("ERR DB index is out of range")
    assert raw.cmd("SELECT", "-1") == Err("ERR DB index is out of range")
    assert raw.cmd("SELECT", "x") == Err("ERR value is not an integer or out of range")
    assert raw.cmd("SELECT") == Err("ERR wrong number of arguments for 'select' command")
    assert raw.cmd("SELECT", "0", "1") == Err("ERR wrong number of arguments for 'select' command")


def test_hello_2(raw):
    cid = raw.cmd("CLIENT", "ID")
    reply = raw.cmd("HELLO", "2")
    assert isinstance(reply, list)
    m = dict(zip(reply[::2], reply[1::2]))
    assert m[b"server"] == b"redis"
    assert m[b"version"].startswith(b"7.0.")
    assert m[b"proto"] == 2
    assert m[b"id"] == cid
    assert m[b"mode"] == b"standalone"
    assert m[b"role"] == b"master"
    assert m[b"modules"] == []
    assert reply[::2] == [b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"]


def test_hello_3_switches_to_resp3(raw):
    reply = raw.cmd("HELLO", "3")
    assert isinstance(reply, Map)
    assert list(reply) == [b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"]
    assert reply[b"proto"] == 3
    # RESP3 null for a missing key
    raw.send(b"*2\r\n$3\r\nGET\r\n$7\r\nmissing\r\n")
    assert raw.sock.recv(100) == b"_\r\n"
    # HELLO with no version keeps the protocol in force
    assert raw.cmd("HELLO")[b"proto"] == 3
    assert isinstance(raw.cmd("HELLO", "2"), list)
    raw.send(b"*2\r\n$3\r\nGET\r\n$7\r\nmissing\r\n")
    assert raw.sock.recv(100) == b"$-1\r\n"


def test_hello_setname(raw):
    reply = raw.cmd("HELLO", "3", "SETNAME", "conn1")
    assert reply[b"proto"] == 3
    assert raw.cmd("CLIENT", "GETNAME") == b"conn1"


def test_hello_errors(raw):
    assert raw.cmd("HELLO", "4") == Err("NOPROTO unsupported protocol version")
    assert raw.cmd("HELLO", "1") == Err("NOPROTO unsupported protocol version")
    assert raw.cmd("HELLO", "x") == Err("ERR Protocol version is not an integer or out of range")
    assert raw.cmd("HELLO", "3", "FOO") == Err("ERR Syntax error in HELLO option 'FOO'")
    assert raw.cmd("HELLO", "2", "AUTH", "nobody", "wrong") == Err(
        "WRONGPASS invalid username-password pair or user is disabled.")
    # a failed HELLO changes nothing
    assert raw.cmd("PING") == "PONG"


def test_reset(raw):
    raw.cmd("HELLO", "3", "SETNAME", "before")
    assert raw.cmd("SELECT", "5") == "OK"
    raw.cmd("SET", "k", "in5")
    assert raw.cmd("RESET") == "RESET"
    # back to RESP2, db 0, no name
    assert raw.cmd("CLIENT", "GETNAME") is None
    assert raw.cmd("GET", "k") is None
    assert isinstance(raw.cmd("HELLO", "2"), list)
    info = raw.cmd("CLIENT", "INFO").decode()
    assert client_field(info, "db") == "0"
    assert client_field(info, "resp") == "2"


def test_reset_turns_replies_back_on(raw):
    raw.send(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n")
    assert raw.cmd("RESET") == "RESET"
    assert raw.cmd("PING") == "PONG"


def test_client_setname_getname(raw):
    assert raw.cmd("CLIENT", "GETNAME") is None
    assert raw.cmd("CLIENT", "SETNAME", "worker-a") == "OK"
    assert raw.cmd("CLIENT", "GETNAME") == b"worker-a"
    assert client_field(raw.cmd("CLIENT", "INFO").decode(), "name") == "worker-a"
    assert raw.cmd("CLIENT", "SETNAME", "") == "OK"
    assert raw.cmd("CLIENT", "GETNAME") is None


@pytest.mark.parametrize("bad", ["a b", "a\nb", "caf\xe9"])
def test_client_setname_rejects_special_characters(raw, bad):
    assert raw.cmd("CLIENT", "SETNAME", bad) == Err(
        "ERR Client names cannot contain spaces, newlines or special characters.")


def test_client_id(server, raw):
    a = raw.cmd("CLIENT", "ID")
    assert isinstance(a, int) and a > 0
    with server.raw() as other:
        b = other.cmd("CLIENT", "ID")
    assert b != a
    assert raw.cmd("CLIENT", "ID") == a
    assert raw.cmd("CLIENT", "ID", "x") == Err(
        "ERR wrong number of arguments for 'client|id' command")


def test_client_info(raw):
    raw.cmd("SELECT", "3")
    info = raw.cmd("CLIENT", "INFO")
    assert isinstance(info, bytes) and info.endswith(b"\n") and info.count(b"\n") == 1
    info = info.decode()
    assert client_field(info, "id") == str(raw.cmd("CLIENT", "ID"))
    assert client_field(info, "addr") == "%s:%d" % raw.sock.getsockname()
    assert client_field(info, "laddr") == "%s:%d" % raw.sock.getpeername()
    assert client_field(info, "db") == "3"
    assert client_field(info, "cmd") == "client|info"
    assert client_field(info, "resp") == "2"
    assert client_field(info, "user") == "default"
    for f in ["name", "age", "idle", "flags", "sub", "psub", "multi", "qbuf", "omem", "tot-mem", "events"]:
        client_field(info, f)


def test_client_list(server, raw):
    raw.cmd("CLIENT", "SETNAME", "lister")
    with server.raw() as other:
        other.cmd("CLIENT", "SETNAME", "other")
        other_id = other.cmd("CLIENT", "ID")
        listing = raw.cmd("CLIENT", "LIST").decode()
        lines = listing.splitlines()
        assert listing.endswith("\n")
        names = {client_field(line, "name"): line for line in lines}
        assert {"lister", "other"} <= set(names)
        assert client_field(names["lister"], "cmd") == "client|list"
        assert client_field(names["other"], "id") == str(other_id)
        # filters
        only = raw.cmd("CLIENT", "LIST", "ID", str(other_id)).decode().splitlines()
        assert len(only) == 1 and client_field(only[0], "name") == "other"
        assert raw.cmd("CLIENT", "LIST", "ID", "999999") == b""
        typed = raw.cmd("CLIENT", "LIST", "TYPE", "normal").decode().splitlines()
        assert len(typed) >= 2
        assert raw.cmd("CLIENT", "LIST", "TYPE", "foo") == Err("ERR Unknown client type 'foo'")
        assert raw.cmd("CLIENT", "LIST", "ID", "x") == Err("ERR Invalid client ID")


def test_client_kill_by_id(server, r):
    with server.raw() as victim:
        vid = victim.cmd("CLIENT", "ID")
        assert r.execute_command("CLIENT", "KILL", "ID", vid) == 1
        data, closed = victim.read_all()
        assert closed and data == b""
    assert r.execute_command("CLIENT", "KILL", "ID", vid) == 0


def test_client_kill_by_addr(server, raw):
    with server.raw() as victim:
        # Once it has an answer, its worker has accepted it (a kill may not
        # race the accept).
        assert victim.cmd("PING") == "PONG"
        addr = "%s:%d" % victim.sock.getsockname()
        assert raw.cmd("CLIENT", "KILL", "ADDR", addr) == 1
        data, closed = victim.read_all()
        assert closed and data == b""
    assert raw.cmd("CLIENT", "KILL", "ADDR", "1.2.3.4:5") == 0


def test_client_kill_legacy_form(server, raw):
    with server.raw() as victim:
        # Once it has an answer, its worker has accepted it (a kill may not
        # race the accept).
        assert victim.cmd("PING") == "PONG"
        addr = "%s:%d" % victim.sock.getsockname()
        assert raw.cmd("CLIENT", "KILL", addr) == "OK"
        data, closed = victim.read_all()
        assert closed
    assert raw.cmd("CLIENT", "KILL", "1.2.3.4:5") == Err("ERR No such client")


def test_client_kill_skipme(raw):
    me = raw.cmd("CLIENT", "ID")
    addr = "%s:%d" % raw.sock.getsockname()
    assert raw.cmd("CLIENT", "KILL", "ID", str(me)) == 0  # SKIPME yes by default
    assert raw.cmd("CLIENT", "KILL", "ADDR", addr, "SKIPME", "yes") == 0
    assert raw.cmd("PING") == "PONG"
    assert raw.cmd("CLIENT", "KILL", "ID", str(me), "SKIPME", "no") == 1
    _, closed = raw.read_all()
    assert closed


def test_client_kill_errors(raw):
    assert raw.cmd("CLIENT", "KILL", "ID", "x") == Err("ERR client-id should be greater than 0")
    assert raw.cmd("CLIENT", "KILL", "FOO", "bar") == Err("ERR syntax error")
    assert raw.cmd("CLIENT", "KILL", "ID", "1", "SKIPME") == Err("ERR syntax error")
    assert raw.cmd("CLIENT", "KILL", "SKIPME", "maybe") == Err("ERR syntax error")
    assert raw.cmd("CLIENT", "KILL", "ID", "99999999") == 0


def test_client_no_evict(raw):
    assert raw.cmd("CLIENT", "NO-EVICT", "on") == "OK"
    assert "e" in client_field(raw.cmd("CLIENT", "INFO").decode(), "flags")
    assert raw.cmd("CLIENT", "NO-EVICT", "off") == "OK"
    assert "e" not in client_field(raw.cmd("CLIENT", "INFO").decode(), "flags")
    assert raw.cmd("CLIENT", "NO-EVICT", "maybe") == Err("ERR syntax error")


def test_client_reply_off_skip_on(raw):
    raw.send(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n")
    raw.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n")
    raw.send(b"*1\r\n$4\r\nPING\r\n")
    assert raw.cmd("CLIENT", "REPLY", "ON") == "OK"
    assert raw.cmd("GET", "k") == b"1"
    # SKIP: no reply to itself nor to the next command
    raw.send(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$4\r\nSKIP\r\n")
    raw.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n2\r\n")
    assert raw.cmd("GET", "k") == b"2"
    assert raw.cmd("CLIENT", "REPLY", "maybe") == Err("ERR syntax error")


def test_client_unknown_subcommand(raw):
    assert raw.cmd("CLIENT", "FOO") == Err("ERR unknown subcommand 'FOO'. Try CLIENT HELP.")
    assert raw.cmd("CLIENT") == Err("ERR wrong number of arguments for 'client' command")


def test_redis_py_client_helpers(r):
    assert r.client_setname("py") is True
    assert r.client_getname() == "py"
    info = r.client_info()
    assert info["name"] == "py"
    assert any(c["name"] == "py" for c in r.client_list())


def test_idle_clients_are_closed_after_timeout(server, raw):
    """CONFIG SET timeout closes clients idle that long (on every worker);
    a client that keeps talking stays."""
    assert raw.cmd("CONFIG", "SET", "timeout", "1") == "OK"
    try:
        with server.raw() as idle:
            assert idle.cmd("PING") == "PONG"
            for _ in range(5):
                time.sleep(0.5)
                assert raw.cmd("PING") == "PONG"
            _, closed = idle.read_all()
            assert closed
    finally:
        assert raw.cmd("CONFIG", "SET", "timeout", "0") == "OK"
    assert raw.cmd("CONFIG", "GET", "timeout") == [b"timeout", b"0"]
