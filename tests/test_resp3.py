"""RESP3 end to end: after HELLO 3 the server sends maps, sets, nulls and
verbatim strings exactly where Redis 7.0 does (and keeps bulk strings where
Redis does, e.g. INCRBYFLOAT's reply is a bulk string, not a double). Checked
byte for byte on a raw socket and through redis-py with protocol=3."""

import pytest

from shoaltest import Map, Verbatim, encode


@pytest.fixture
def r3conn(raw):
    assert isinstance(raw.cmd("HELLO", "3"), Map)
    return raw


def raw_reply(c, *args):
    """The exact bytes of the reply to one command."""
    c.send(encode(*args))
    return c.reply_bytes()


def test_resp3_nulls(r3conn):
    assert raw_reply(r3conn, "GET", "nokey") == b"_\r\n"
    assert raw_reply(r3conn, "SET", "f", "1.5") == b"+OK\r\n"
    assert raw_reply(r3conn, "MGET", "f", "nokey") == b"*2\r\n$3\r\n1.5\r\n_\r\n"
    assert raw_reply(r3conn, "SET", "f", "x", "NX") == b"_\r\n"
    assert raw_reply(r3conn, "SET", "k", "v", "GET") == b"_\r\n"
    assert raw_reply(r3conn, "CLIENT", "GETNAME") == b"_\r\n"
    assert raw_reply(r3conn, "OBJECT", "ENCODING", "nokey") == b"_\r\n"
    assert raw_reply(r3conn, "FLUSHALL") == b"+OK\r\n"
    assert raw_reply(r3conn, "RANDOMKEY") == b"_\r\n"


def test_resp3_incrbyfloat_is_bulk(r3conn):
    r3conn.cmd("SET", "f", "1.5")
    assert raw_reply(r3conn, "INCRBYFLOAT", "f", "1") == b"$3\r\n2.5\r\n"


def test_resp3_hello_map_bytes(r3conn):
    cid = r3conn.cmd("CLIENT", "ID")
    data = raw_reply(r3conn, "HELLO", "3")
    assert data.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$")
    assert data.endswith(b"$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:%d\r\n$4\r\nmode\r\n$10\r\nstandalone"
                         b"\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n" % cid)


def test_resp3_config_get_is_a_map(r3conn):
    assert raw_reply(r3conn, "CONFIG", "GET", "maxmemory-policy") == (
        b"%1\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n")


def test_resp3_client_info_and_info_are_verbatim(r3conn):
    info = r3conn.cmd("CLIENT", "INFO")
    assert isinstance(info, Verbatim) and b"resp=3" in info
    data = raw_reply(r3conn, "INFO", "server")
    assert data.startswith(b"=") and b"\r\ntxt:# Server\r\n" in data


def test_resp3_lcs_idx_is_a_map(r3conn):
    r3conn.cmd("MSET", "key1", "ohmytext", "key2", "mynewtext")
    assert raw_reply(r3conn, "LCS", "key1", "key2", "IDX") == (
        b"%2\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n"
        b"*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n")


def test_resp3_command_info_uses_sets(r3conn):
    data = raw_reply(r3conn, "COMMAND", "INFO", "get")
    assert data.startswith(b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~")


def test_resp3_scan_and_time_stay_arrays(r3conn):
    r3conn.cmd("SET", "a", "1")
    assert raw_reply(r3conn, "SCAN", "0") == b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n"
    assert raw_reply(r3conn, "TIME").startswith(b"*2\r\n$10\r\n")


def test_redis_py_protocol_3(server, r):
    c = server.client(protocol=3)
    try:
        assert c.ping() is True
        assert c.set("k", "v") is True
        assert c.get("k") == "v"
        assert c.get("nokey") is None
        assert c.mget("k", "nokey") == ["v", None]
        assert c.set("k", "w", nx=True) is None
        assert c.set("k", "w", get=True) == "v"
        assert c.incrbyfloat("f", "1.10") == 1.1
        assert c.exists("k", "nokey") == 1
        assert c.ttl("k") == -1
        assert c.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert c.client_getname() is None
        assert c.client_setname("r3") is True
        assert c.client_getname() == "r3"
        assert c.lcs("k", "k") == "w"
        p = c.pipeline(transaction=False)
        for i in range(100):
            p.set(f"p{i}", i)
            p.get(f"p{i}")
        out = p.execute()
        assert out[1::2] == [str(i) for i in range(100)]
        assert c.execute_command("HELLO", "3")["proto"] == 3
    finally:
        c.close()
