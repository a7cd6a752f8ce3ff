"""AUTH and ACL across workers and protocols: requirepass refuses an
unauthenticated client on every protocol, a user without +@write cannot
write, and a user changed on one worker is enforced on the other at once."""

import socket

import pytest
import redis
import requests

from shoaltest import encode

pytestmark = pytest.mark.shoal_only


def cmd(conn, *args):
    """The exact bytes of one command's reply."""
    conn.send(encode(*args))
    return conn.reply_bytes()


@pytest.fixture
def two(make_server):
    return make_server(workers=2)


def test_requirepass_refuses_unauthenticated_clients_on_every_protocol(two, conns):
    admin = two.client(decode_responses=True)
    assert admin.config_set("requirepass", "s3cret")
    # Redis: NOAUTH until AUTH, WRONGPASS for a bad password.
    c = conns(two)
    assert cmd(c, "SET", "k", "v") == b"-NOAUTH Authentication required.\r\n"
    assert cmd(c, "AUTH", "nope").startswith(b"-WRONGPASS invalid username-password pair")
    assert cmd(c, "AUTH", "s3cret") == b"+OK\r\n"
    assert cmd(c, "SET", "k", "v") == b"+OK\r\n"
    r = two.client(decode_responses=True, password="s3cret")
    # HTTP: 401 without credentials; Basic (or Bearer) logs in.
    base = f"http://127.0.0.1:{two.http_port}"
    resp = requests.get(f"{base}/?get+k")
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Basic")
    assert requests.get(f"{base}/k").status_code == 401
    assert requests.get(f"{base}/?get+k", auth=("default", "bad")).status_code == 401
    assert requests.get(f"{base}/?get+k", auth=("default", "s3cret")).content == b"$1\r\nv\r\n"
    bearer = {"Authorization": "Bearer s3cret"}
    assert requests.get(f"{base}/k", headers=bearer).content == b"v"
    assert requests.get(f"{base}/health").status_code == 200
    # memcached text protocol: refused, nothing runs.
    with socket.create_connection(("127.0.0.1", two.mc_port), timeout=5) as s:
        s.sendall(b"get k\r\n")
        assert s.recv(100) == b"CLIENT_ERROR unauthenticated\r\n"
    assert r.config_set("requirepass", "")
    # Without the password every protocol works again.
    assert two.client().get("k") == "v"


def test_a_user_without_write_cannot_write(two):
    admin = two.client(decode_responses=True)
    admin.set("k", "v")
    assert admin.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "~*", "+@read")
    r = two.client(decode_responses=True, username="reader", password="pw")
    assert r.get("k") == "v"
    with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions to run the 'set' command"):
        r.set("k", "w")
    assert admin.get("k") == "v"
    # The same user through HTTP cannot write either.
    base = f"http://127.0.0.1:{two.http_port}"
    resp = requests.get(f"{base}/?set+k+w", auth=("reader", "pw"))
    assert b"NOPERM" in resp.content
    assert requests.put(f"{base}/k", data=b"w", auth=("reader", "pw")).status_code >= 400
    assert requests.get(f"{base}/k", auth=("reader", "pw")).content == b"v"
    assert admin.get("k") == "v"
    entry = admin.execute_command("ACL", "LOG", "1")[0]
    assert entry[entry.index("object") + 1] == "set"
    assert entry[entry.index("username") + 1] == "reader"


def test_read_and_write_key_patterns_follow_each_keys_access(two):
    """%R~ and %W~ are checked per key, by what the command does to that
    key (its key spec flags): COPY reads its source and writes its
    destination; LMOVE writes both (it pops the source)."""
    admin = two.client(decode_responses=True)
    admin.set("read:k", "v")
    admin.rpush("read:list", "a")
    assert admin.execute_command("ACL", "SETUSER", "rw", "on", ">pw", "+@all",
                                 "%R~read:*", "%W~write:*")
    u = two.client(decode_responses=True, username="rw", password="pw")
    assert u.get("read:k") == "v"
    with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions to access one of the keys"):
        u.set("read:k", "w")
    assert u.set("write:k", "w")
    with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions to access one of the keys"):
        u.get("write:k")
    assert u.copy("read:k", "write:copy") == 1
    with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions to access one of the keys"):
        u.lmove("read:list", "write:list")
    assert admin.get("write:copy") == "v"
    assert admin.execute_command("ACL", "DRYRUN", "rw", "COPY", "read:k", "write:x") == "OK"
    assert "no permissions to access the 'write:x' key" in admin.execute_command(
        "ACL", "DRYRUN", "rw", "GET", "write:x")
    # SORT's BY and GET patterns read keys no argument names: refused
    # unless the user reads every key; a constant BY reads nothing.
    assert u.sort("read:list", by="nosort", alpha=True) == ["a"]
    with pytest.raises(redis.ResponseError, match="^BY option of SORT denied due to insufficient ACL"):
        u.sort("read:list", by="w_*")
    with pytest.raises(redis.ResponseError, match="^GET option of SORT denied due to insufficient ACL"):
        u.sort("read:list", get="#", alpha=True)
    assert admin.sort("read:list", get="#", alpha=True) == ["a"]


def test_acl_changes_on_one_worker_apply_on_the_other_at_once(two, conns):
    w0 = conns(two, 0)
    w1 = conns(two, 1)
    assert cmd(w0, "ACL", "SETUSER", "bob", "on", ">pw", "~b:*", "+@all") == b"+OK\r\n"
    assert cmd(w1, "AUTH", "bob", "pw") == b"+OK\r\n"
    assert cmd(w1, "SET", "b:1", "x") == b"+OK\r\n"
    assert cmd(w1, "SET", "c:1", "x").startswith(b"-NOPERM")
    # Taking the command away on worker 0 holds on worker 1 at once.
    assert cmd(w0, "ACL", "SETUSER", "bob", "-set") == b"+OK\r\n"
    assert cmd(w1, "SET", "b:1", "y").startswith(b"-NOPERM this user has no permissions to run the 'set' command")
    # Deleting the user closes its connection on the other worker.
    assert cmd(w0, "ACL", "DELUSER", "bob") == b":1\r\n"
    with pytest.raises((ConnectionError, OSError, EOFError, AssertionError)):
        reply = cmd(w1, "PING")
        assert reply not in (b"", None)


def test_memcached_clients_obey_the_default_users_rules(two):
    admin = two.client(decode_responses=True)
    admin.set("k", "v")
    assert admin.execute_command("ACL", "SETUSER", "admin", "on", ">a", "~*", "&*", "+@all")
    root = two.client(decode_responses=True, username="admin", password="a")
    assert root.execute_command("ACL", "SETUSER", "default", "-@write")
    try:
        with socket.create_connection(("127.0.0.1", two.mc_port), timeout=5) as s:
            s.sendall(b"set k 0 0 1\r\nw\r\n")
            assert s.recv(100) == b"CLIENT_ERROR permission denied\r\n"
            s.sendall(b"get k\r\n")
            assert s.recv(100) == b"VALUE k 0 1\r\nv\r\nEND\r\n"
        # Redis clients of the default user cannot write either.
        c = two.client(decode_responses=True)
        with pytest.raises(redis.exceptions.NoPermissionError):
            c.set("k", "w")
    finally:
        root.execute_command("ACL", "SETUSER", "default", "+@all")
    assert root.get("k") == "v"
