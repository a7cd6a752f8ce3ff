"""TLS on the Redis TLS port (`tls-port`), the memcached port
(`memcached-tls yes`) and the HTTP port (`http-tls yes`): redis-py with
`ssl=True`, redis-cli `--tls`, pymemcache and urllib over TLS, client
certificates required / optional / not asked for, reload on CONFIG SET, and
clients that do not speak TLS. The certificates are made here with the
openssl command."""

import os
import shutil
import socket
import ssl
import subprocess
import urllib.request

import pytest
import redis
from pymemcache.client.base import Client as MemcacheClient

from shoaltest import SHOAL_BIN, TARGET, Server, free_port

pytestmark = [
    pytest.mark.shoal_only,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]


def read_until_closed(sock):
    """Everything `sock` receives until the server closes it."""
    got = b""
    while chunk := sock.recv(4096):
        got += chunk
    return got


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_ca(d, name):
    openssl("req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-days", "2",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", "-subj", f"/CN={name}", cwd=d)


def make_cert(d, ca, name, ext):
    """A v3 certificate `name` signed by `ca` with the extensions `ext`."""
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext)
    openssl("req", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", f"{name}.ext",
            cwd=d)


SERVER_EXT = "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
CLIENT_EXT = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tls"))
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_cert(d, "ca", "server", SERVER_EXT)
    make_cert(d, "ca", "server2", SERVER_EXT)
    make_cert(d, "ca", "client", CLIENT_EXT)
    make_cert(d, "otherca", "stranger", CLIENT_EXT)
    for f in os.listdir(d):
        if f.endswith(".key"):
            os.chmod(os.path.join(d, f), 0o600)
    return lambda name: os.path.join(d, name)


@pytest.fixture(scope="module")
def tls_server(certs):
    if TARGET != "shoal":
        pytest.skip("shoal's own listeners")
    tls_port = free_port()
    s = Server(workers=2, extra_args=[
        "--tls-port", str(tls_port),
        "--tls-cert-file", certs("server.crt"),
        "--tls-key-file", certs("server.key"),
        "--tls-ca-cert-file", certs("ca.crt"),
        "--memcached-tls", "yes",
        "--http-tls", "yes",
    ]).start()
    s.tls_port = tls_port
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def auth_back_to_yes(request):
    yield
    if "tls_server" in request.fixturenames:
        server = request.getfixturevalue("tls_server")
        server.client().config_set("tls-auth-clients", "yes")
        server.client().config_set("tls-protocols", "")


def tls_client(server, certs, cert="client", **kw):
    args = dict(port=server.tls_port, ssl=True, ssl_ca_certs=certs("ca.crt"),
                socket_timeout=10)
    if cert:
        args.update(ssl_certfile=certs(f"{cert}.crt"), ssl_keyfile=certs(f"{cert}.key"))
    args.update(kw)
    return redis.Redis(host="127.0.0.1", **args)


def test_redis_py_over_tls_with_a_client_certificate(tls_server, certs):
    r = tls_client(tls_server, certs)
    assert r.ping()
    r.set("tls:key", "v" * 100_000)
    assert r.get("tls:key") == b"v" * 100_000
    # The same data through the plain port: one store.
    assert tls_server.client().strlen("tls:key") == 100_000
    # A large reply (more than the socket takes at once) arrives whole.
    r.set("tls:big", os.urandom(4 << 20))
    assert r.get("tls:big") == tls_server.client(decode_responses=False).get("tls:big")


def test_every_worker_serves_the_tls_port(tls_server, certs):
    clients = [tls_client(tls_server, certs) for _ in range(12)]
    for i, c in enumerate(clients):
        assert c.echo(f"m{i}") == f"m{i}".encode()
    listed = tls_server.client().client_list()
    on_tls = [c for c in listed if c["laddr"].endswith(f":{tls_server.tls_port}")]
    assert len(on_tls) >= 12


def refused(client):
    with pytest.raises((redis.ConnectionError, ssl.SSLError, OSError)):
        client.ping()


def test_client_certificates_required_optional_or_not_asked(tls_server, certs):
    plain = tls_server.client()
    assert plain.config_get("tls-auth-clients") == {"tls-auth-clients": "yes"}
    refused(tls_client(tls_server, certs, cert=None))
    refused(tls_client(tls_server, certs, cert="stranger"))
    assert plain.config_set("tls-auth-clients", "optional")
    assert tls_client(tls_server, certs, cert=None).ping()
    assert tls_client(tls_server, certs).ping()
    refused(tls_client(tls_server, certs, cert="stranger"))
    assert plain.config_set("tls-auth-clients", "no")
    assert tls_client(tls_server, certs, cert=None).ping()


def test_redis_cli_tls(tls_server, certs):
    out = subprocess.run(
        ["redis-cli", "-p", str(tls_server.tls_port), "--tls", "--cacert", certs("ca.crt"),
         "--cert", certs("client.crt"), "--key", certs("client.key"), "ping"],
        capture_output=True, text=True, timeout=20)
    assert out.stdout.strip() == "PONG"


def test_plain_client_on_the_tls_port_is_closed(tls_server, certs):
    with socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=10) as s:
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        got = read_until_closed(s)
        # Closed without a word (as Redis does), never a reply.
        assert got == b""
    with socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=10) as s:
        s.sendall(os.urandom(2048))
        while s.recv(4096):
            pass
    assert tls_client(tls_server, certs).ping()
    assert tls_server.client().ping()


def test_config_set_checks_and_reloads_the_certificate(tls_server, certs):
    plain = tls_server.client()
    with pytest.raises(redis.ResponseError) as e:
        plain.config_set("tls-cert-file", "/nonexistent/cert.pem")
    assert str(e.value) == ("CONFIG SET failed (possibly related to argument 'tls-cert-file')"
                            " - Unable to update TLS configuration. Check server logs.")
    assert plain.config_get("tls-cert-file")["tls-cert-file"] == certs("server.crt")

    def served_cn():
        ctx = ssl.create_default_context(cafile=certs("ca.crt"))
        ctx.load_cert_chain(certs("client.crt"), certs("client.key"))
        with socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                subject = dict(x[0] for x in s.getpeercert()["subject"])
                return subject["commonName"]

    assert served_cn() == "server"
    assert plain.config_set("tls-cert-file", certs("server2.crt"),
                            "tls-key-file", certs("server2.key"))
    try:
        assert served_cn() == "server2"
    finally:
        plain.config_set("tls-cert-file", certs("server.crt"), "tls-key-file", certs("server.key"))
    assert served_cn() == "server"


def test_an_encrypted_key_needs_its_password(tls_server, certs):
    plain = tls_server.client()
    encrypted = certs("server.key") + ".encrypted"
    subprocess.run(["openssl", "rsa", "-in", certs("server.key"), "-out", encrypted,
                    "-aes256", "-passout", "pass:1234"], check=True, capture_output=True)
    with pytest.raises(redis.ResponseError, match="Unable to update TLS configuration"):
        plain.config_set("tls-key-file", encrypted)
    assert plain.config_set("tls-key-file-pass", "1234")
    try:
        assert plain.config_set("tls-key-file", encrypted)
        assert tls_client(tls_server, certs).ping()
        with pytest.raises(redis.ResponseError, match="Unable to update TLS configuration"):
            plain.config_set("tls-key-file-pass", "wrong")
    finally:
        plain.config_set("tls-key-file", certs("server.key"))
        plain.config_set("tls-key-file-pass", "")


def make_v1_cert(d, ca, name):
    """An X.509 v1 certificate: `openssl x509 -req` with no extensions file,
    as Redis's utils/gen-test-certs.sh makes its `redis.crt`."""
    openssl("req", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", cwd=d)
    os.chmod(os.path.join(d, f"{name}.key"), 0o600)
    out = subprocess.run(["openssl", "x509", "-in", f"{name}.crt", "-noout", "-text"],
                         cwd=d, capture_output=True, text=True, check=True).stdout
    assert "Version: 1 (0x0)" in out


def test_an_x509_v1_certificate_is_served_but_not_accepted_from_a_client(tls_server, certs):
    d = os.path.dirname(certs("ca.crt"))
    make_v1_cert(d, "ca", "v1")
    plain = tls_server.client()
    # Its key must still be the certificate's.
    with pytest.raises(redis.ResponseError, match="Unable to update TLS configuration"):
        plain.config_set("tls-cert-file", certs("v1.crt"), "tls-key-file", certs("server.key"))
    assert plain.config_set("tls-cert-file", certs("v1.crt"), "tls-key-file", certs("v1.key"))
    try:
        # OpenSSL accepts a v1 server certificate (it has no name to check).
        ctx = ssl.create_default_context(cafile=certs("ca.crt"))
        ctx.check_hostname = False
        ctx.load_cert_chain(certs("client.crt"), certs("client.key"))
        with socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as s:
                assert dict(x[0] for x in s.getpeercert()["subject"])["commonName"] == "v1"
                s.sendall(b"PING\r\n")
                assert s.recv(64) == b"+PONG\r\n"
    finally:
        plain.config_set("tls-cert-file", certs("server.crt"), "tls-key-file", certs("server.key"))
    # webpki verifies client certificates and refuses v1 (docs/security.md).
    refused(tls_client(tls_server, certs, cert="v1"))
    assert tls_client(tls_server, certs).ping()


def test_tls_protocols(tls_server, certs):
    plain = tls_server.client()
    with pytest.raises(redis.ResponseError):
        plain.config_set("tls-protocols", "TLSv1.1")
    assert plain.config_set("tls-protocols", "TLSv1.2")
    only13 = tls_client(tls_server, certs, ssl_min_version=ssl.TLSVersion.TLSv1_3)
    refused(only13)
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    ctx.load_cert_chain(certs("client.crt"), certs("client.key"))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.version() == "TLSv1.2"
            s.sendall(b"PING\r\n")
            assert s.recv(64) == b"+PONG\r\n"


def test_tls_port_is_immutable(tls_server):
    with pytest.raises(redis.ResponseError, match="can't set immutable config"):
        tls_server.client().config_set("tls-port", "0")


def test_memcached_over_tls(tls_server, certs):
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    ctx.load_cert_chain(certs("client.crt"), certs("client.key"))
    mc = MemcacheClient(("localhost", tls_server.mc_port), tls_context=ctx, timeout=10)
    assert mc.set("tls-mc", b"hello", noreply=False)
    assert mc.get("tls-mc") == b"hello"
    mc.close()
    # A plain memcached client gets no reply, only a close.
    with socket.create_connection(("127.0.0.1", tls_server.mc_port), timeout=10) as s:
        s.sendall(b"get tls-mc\r\n")
        got = read_until_closed(s)
        assert b"VALUE" not in got


def test_https(tls_server, certs):
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    ctx.load_cert_chain(certs("client.crt"), certs("client.key"))
    base = f"https://localhost:{tls_server.http_port}"
    req = urllib.request.Request(f"{base}/tls-http", data=b"over https", method="PUT")
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        assert resp.status in (201, 204)
    with urllib.request.urlopen(f"{base}/tls-http", context=ctx, timeout=10) as resp:
        assert resp.read() == b"over https"


def test_a_bad_tls_configuration_fails_the_start(certs):
    if TARGET != "shoal":
        pytest.skip("shoal's own listeners")
    name = f"shoal-pytest-{os.getpid()}-badtls"
    out = subprocess.run(
        [SHOAL_BIN, "serve", "--workers", "1", "--name", name, "--port", str(free_port()),
         "--memcached-port", "0", "--memcached-udp-port", "0", "--http-port", "0",
         "--nats-port", "0", "--tls-port", str(free_port()),
         "--tls-cert-file", certs("server.crt"), "--tls-key-file", "/nonexistent/key.pem",
         "--tls-ca-cert-file", certs("ca.crt")],
        capture_output=True, text=True, timeout=60)
    for leftover in (f"/dev/shm/{name}", f"/dev/shm/{name}.ctl"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    assert out.returncode != 0
    assert "Failed to configure TLS" in out.stdout + out.stderr
    assert "/nonexistent/key.pem" in out.stdout + out.stderr


def test_a_busy_script_still_answers_tls_clients_on_its_worker(certs):
    """One worker: the script's client and the others share its thread, so
    only the script's hook can answer them (BUSY, SCRIPT KILL), through
    their TLS sessions."""
    if TARGET != "shoal":
        pytest.skip("shoal's own listeners")
    tls_port = free_port()
    server = Server(workers=1, extra_args=[
        "--tls-port", str(tls_port),
        "--tls-cert-file", certs("server.crt"),
        "--tls-key-file", certs("server.key"),
        "--tls-ca-cert-file", certs("ca.crt"),
    ]).start()
    try:
        server.client().config_set("busy-reply-threshold", "100")
        ctx = ssl.create_default_context(cafile=certs("ca.crt"))
        ctx.load_cert_chain(certs("client.crt"), certs("client.key"))

        def connect():
            raw = socket.create_connection(("127.0.0.1", tls_port), timeout=10)
            return ctx.wrap_socket(raw, server_hostname="localhost")

        def reply(s):
            got = b""
            while not got.endswith(b"\r\n"):
                got += s.recv(4096)
            return got

        # Every session is up before the script starts (a handshake is the
        # connection task's, which waits for the script).
        script, other, killer = connect(), connect(), connect()
        for s in (other, killer):
            s.sendall(b"PING\r\n")
            assert reply(s) == b"+PONG\r\n"
        script.sendall(b"EVAL 'while true do end' 0\r\n")
        busy = b""
        for _ in range(200):
            other.sendall(b"PING\r\n")
            busy = reply(other)
            if busy.startswith(b"-BUSY"):
                break
        assert busy.startswith(b"-BUSY Redis is busy running a script.")
        # The start of a request is kept for the connection once the
        # script is over; SCRIPT KILL on its own is answered now.
        other.sendall(b"*3\r\n$3\r\nSET\r\n$9\r\nafter:tls\r\n$2\r\nok")
        killer.sendall(b"SCRIPT KILL\r\n")
        assert reply(killer) == b"+OK\r\n"
        assert reply(script).startswith(b"-ERR Script killed by user with SCRIPT KILL")
        other.sendall(b"\r\n")
        assert reply(other) == b"+OK\r\n"
        assert server.client().get("after:tls") == "ok"
        for s in (script, other, killer):
            s.close()
    finally:
        server.stop()
