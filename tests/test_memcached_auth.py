"""memcached authentication: the text protocol's login with an auth file
(memcached 1.6's `-Y`, shoal's `memcached-auth-file`) compared byte for
byte with a real memcached started with the same file; pymemcache logging
in; binary SASL PLAIN; and logins as ACL users when `requirepass` is set."""

import shutil
import socket
import struct

import pytest
import redis
from pymemcache.client.base import Client as MemcacheClient
from pymemcache.exceptions import MemcacheClientError

from memcachetest import RealMemcached
from shoaltest import TARGET, Server

pytestmark = pytest.mark.shoal_only

AUTHFILE = b"foo:bar\nalice:s3:cret\n"


class Lines:
    """A raw connection that reads whole reply lines."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def ask(self, data, lines=1):
        self.sock.sendall(data)
        while self.buf.count(b"\r\n") < lines:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed after {self.buf!r}")
            self.buf += chunk
        cut = 0
        for _ in range(lines):
            cut = self.buf.index(b"\r\n", cut) + 2
        reply, self.buf = self.buf[:cut], self.buf[cut:]
        return reply

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def authfile(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcauth") / "authfile"
    path.write_bytes(AUTHFILE)
    path.chmod(0o600)
    return str(path)


@pytest.fixture(scope="module")
def shoal_mc(authfile):
    if TARGET != "shoal":
        pytest.skip("shoal's memcached front end")
    s = Server(workers=2, extra_args=["--memcached-auth-file", authfile]).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def real_mc(authfile):
    if shutil.which("memcached") is None:
        pytest.skip("memcached is not installed")
    m = RealMemcached(extra_args=["-Y", authfile])
    yield m
    m.stop()


def tok(text):
    return b"set auth 0 0 %d\r\n%s\r\n" % (len(text), text)


# Exchanges on one connection: (bytes sent, reply lines expected).
CASES = [
    [(b"set foo 0 0 2\r\nhi\r\n", 1), (b"get foo\r\n", 1), (b"version\r\n", 1),
     (b"stats\r\n", 1), (tok(b"foo bab"), 1), (tok(b"foo bar"), 1),
     (b"set foo 0 0 2\r\nhi\r\n", 1), (b"get foo\r\n", 3)],
    [(b"mg foo v\r\n", 1), (b"set x 0 0 7 noreply\r\nfoo bar\r\n", 1), (b"mn\r\n", 1)],
    [(b"bogus\r\n", 1), (b"add k 0 0 7\r\nfoo bar\r\n", 1), (b"cas k 0 0 7 1\r\nfoo bar\r\n", 1)],
    [(tok(b"foo  bar"), 1), (b"get nothing\r\n", 1)],
    [(tok(b" foo bar "), 1), (b"get nothing\r\n", 1)],
    [(tok(b"foo bar\x00x"), 1), (b"get nothing\r\n", 1)],
    [(tok(b"alice s3:cret"), 1), (b"get nothing\r\n", 1)],
    [(tok(b"foo ba"), 1), (tok(b"fo bar"), 1), (tok(b"foo:bar"), 1), (tok(b"foobar"), 1),
     (tok(b"bar foo"), 1), (b"get nothing\r\n", 1)],
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_text_login_replies_as_memcached(shoal_mc, real_mc, case):
    replies = {}
    for name, port in (("shoal", shoal_mc.mc_port), ("memcached", real_mc.mc_port)):
        c = Lines(port)
        replies[name] = [c.ask(data, lines) for data, lines in CASES[case]]
        c.close()
    assert replies["shoal"] == replies["memcached"]


def test_pymemcache_logs_in_with_a_set(shoal_mc):
    mc = MemcacheClient(("127.0.0.1", shoal_mc.mc_port), timeout=10)
    with pytest.raises(MemcacheClientError, match="unauthenticated"):
        mc.get("k")
    assert mc.set("login", b"foo bar", noreply=False)
    assert mc.set("k", b"v", noreply=False)
    assert mc.get("k") == b"v"
    mc.close()
    other = MemcacheClient(("127.0.0.1", shoal_mc.mc_port), timeout=10)
    with pytest.raises(MemcacheClientError, match="authentication failure"):
        other.set("login", b"foo wrong", noreply=False)
    other.close()


# Binary protocol.
GET, VERSION, SASL_LIST, SASL_AUTH, SASL_STEP = 0x00, 0x0B, 0x20, 0x21, 0x22


def bin_request(op, key=b"", value=b"", opaque=7):
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), 0, 0, 0, len(key) + len(value),
                       opaque, 0) + key + value


def bin_ask(sock, request):
    sock.sendall(request)
    head = b""
    while len(head) < 24:
        chunk = sock.recv(24 - len(head))
        assert chunk, "closed"
        head += chunk
    _, op, key_len, extras_len, _, status, body_len, opaque, _ = struct.unpack(">BBHBBHIIQ", head)
    body = b""
    while len(body) < body_len:
        body += sock.recv(body_len - len(body))
    return op, status, body[extras_len + key_len:]


def test_binary_sasl_plain(shoal_mc):
    with socket.create_connection(("127.0.0.1", shoal_mc.mc_port), timeout=10) as s:
        assert bin_ask(s, bin_request(SASL_LIST)) == (SASL_LIST, 0, b"PLAIN")
        assert bin_ask(s, bin_request(GET, b"k")) == (GET, 0x20, b"Auth failure")
        assert bin_ask(s, bin_request(VERSION))[1] == 0
        assert bin_ask(s, bin_request(SASL_AUTH, b"PLAIN", b"\0foo\0nope"))[1] == 0x20
        assert bin_ask(s, bin_request(SASL_AUTH, b"CRAM-MD5", b"x"))[1] == 0x20
        assert bin_ask(s, bin_request(SASL_STEP, b"PLAIN", b"\0foo\0bar"))[1] == 0x20
        assert bin_ask(s, bin_request(SASL_AUTH, b"PLAIN", b"\0foo\0bar")) == \
            (SASL_AUTH, 0, b"Authenticated")
        assert bin_ask(s, bin_request(GET, b"binary-missing")) == (GET, 1, b"Not found")


def test_acl_users_log_in_when_requirepass_is_set():
    if TARGET != "shoal":
        pytest.skip("shoal's memcached front end")
    s = Server(extra_args=["--requirepass", "sekret"]).start()
    try:
        r = redis.Redis(port=s.port, password="sekret", decode_responses=True)
        r.acl_setuser("reader", enabled=True, passwords=["+pw"], commands=["+get"], keys=["*"])
        c = Lines(s.mc_port)
        assert c.ask(b"get k\r\n") == b"CLIENT_ERROR unauthenticated\r\n"
        assert c.ask(tok(b"default wrong")) == b"CLIENT_ERROR authentication failure\r\n"
        assert c.ask(tok(b"reader pw")) == b"STORED\r\n"
        assert c.ask(b"get k\r\n") == b"END\r\n"
        assert c.ask(b"set k 0 0 1\r\nv\r\n") == b"CLIENT_ERROR permission denied\r\n"
        c.close()
        c = Lines(s.mc_port)
        assert c.ask(tok(b"default sekret")) == b"STORED\r\n"
        assert c.ask(b"set k 0 0 1\r\nv\r\n") == b"STORED\r\n"
        c.close()
        # The failed login is in ACL LOG, as a failed AUTH would be.
        log = r.acl_log()
        assert any(e["reason"] == "auth" and e["username"] == "default" for e in log)
        # A deleted user's connection is logged out.
        c = Lines(s.mc_port)
        assert c.ask(tok(b"reader pw")) == b"STORED\r\n"
        r.acl_deluser("reader")
        assert c.ask(b"get k\r\n") == b"CLIENT_ERROR unauthenticated\r\n"
        c.close()
    finally:
        s.stop()
