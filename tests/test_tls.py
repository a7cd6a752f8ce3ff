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

from shoaltest import (SHOAL_BIN, TARGET, DurableServer, Server, free_port, port_refused,
                       wait_for)

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


def test_an_x509_v1_certificate_is_served_and_accepted_from_a_client(tls_server, certs):
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
    # As a client certificate, as OpenSSL accepts it: signed by the CA.
    assert tls_client(tls_server, certs, cert="v1").ping()
    assert tls_client(tls_server, certs).ping()


def test_a_v1_client_certificate_not_signed_by_the_ca_is_refused(tls_server, certs, tmp_path):
    d = os.path.dirname(certs("ca.crt"))
    # Signed by a CA that is not configured.
    make_v1_cert(d, "otherca", "v1stranger")
    refused(tls_client(tls_server, certs, cert="v1stranger"))
    # Naming the configured CA as its issuer, signed by another key.
    impostor = str(tmp_path)
    make_ca(impostor, "ca")
    make_v1_cert(impostor, "ca", "v1forged")
    for ext in ("crt", "key"):
        shutil.copy(os.path.join(impostor, f"v1forged.{ext}"), os.path.join(d, f"v1forged.{ext}"))
    os.chmod(certs("v1forged.key"), 0o600)
    refused(tls_client(tls_server, certs, cert="v1forged"))
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


def test_tls_port_moves_at_run_time(certs):
    """CONFIG SET tls-port moves the TLS listener of every worker; tls-port 0
    closes it, and the plain and TLS ports can trade places (the sequence
    of the suite's unit/tls 'switch between tcp and tls ports')."""
    first = free_port()
    s = Server(workers=2, extra_args=[
        "--tls-port", str(first),
        "--tls-cert-file", certs("server.crt"),
        "--tls-key-file", certs("server.key"),
        "--tls-ca-cert-file", certs("ca.crt"),
    ]).start()
    try:
        s.tls_port = first
        c = s.client()
        second = free_port()
        assert c.config_set("tls-port", str(second))
        s.tls_port = second
        assert c.config_get("tls-port") == {"tls-port": str(second)}
        # Every connection is served, whichever worker takes it.
        clients = [tls_client(s, certs) for _ in range(8)]
        assert all(t.ping() for t in clients)
        for t in clients:
            t.close()
        wait_for(lambda: port_refused(first), what="the old TLS port closed")

        # Plain RESP takes the TLS port's number, then TLS takes it back.
        plain = s.port
        tls = tls_client(s, certs)
        assert tls.config_set("tls-port", "0")
        wait_for(lambda: port_refused(second), what="the TLS port closed")
        assert tls.config_set("port", str(second))
        s.port = second
        assert redis.Redis(host="127.0.0.1", port=second, socket_timeout=10).ping()
        wait_for(lambda: port_refused(plain), what="the old plain port closed")
        tls.close()
        r = redis.Redis(host="127.0.0.1", port=second, socket_timeout=10)
        assert r.config_set("port", "0")
        assert r.config_set("tls-port", str(second))
        assert tls_client(s, certs).ping()
        # A port that cannot be bound refuses the change.
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(redis.ResponseError, match="Unable to listen on this port"):
            r.config_set("tls-port", str(busy.getsockname()[1]))
        busy.close()
        assert tls_client(s, certs).config_get("tls-port") == {"tls-port": str(second)}
        r.config_set("port", str(plain))
        s.port = plain
    finally:
        s.stop()


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


# -- tls-replication: the replication link over TLS ----------------------------

class TlsOnlyServer(DurableServer):
    """A shoal serving RESP only on its TLS port (`--port 0 --tls-port P`),
    with or without a log directory (`dir=None`: a primary that feeds its
    replicas from the in-memory backlog). Clients are TLS clients with the
    `client` certificate."""

    def __init__(self, dir, certs, tls_args=(), password=None, **kw):
        super().__init__(dir or "/nonexistent", **kw)
        if dir is not None:
            os.makedirs(dir, exist_ok=True)
        self.has_dir = dir is not None
        self.certs = certs
        self.tls_args = list(tls_args)
        self.password = password
        self.tls_port = None

    def argv(self):
        args = super().argv()
        args[args.index("--port") + 1] = "0"
        i = args.index("--dir")
        if self.has_dir:
            # Among Redis-style settings (tls-*), `--dir` is Redis's
            # working directory: the log's is `--log-dir`.
            args[i] = "--log-dir"
        else:
            del args[i:i + 2]
            i = args.index("--appendfsync")
            del args[i:i + 2]
        return args + [
            "--tls-port", str(self.tls_port),
            "--tls-cert-file", self.certs("server.crt"),
            "--tls-key-file", self.certs("server.key"),
        ] + self.tls_args

    def _spawn(self, same_ports=False):
        if not same_ports or self.tls_port is None:
            self.tls_port = free_port()
        super()._spawn(same_ports)

    def client(self, **kw):
        kw.setdefault("decode_responses", True)
        kw.setdefault("password", self.password)
        return tls_client(self, self.certs, **kw)


def replication_info(server):
    return server.client().info("replication")


def test_a_replica_follows_its_primary_over_tls_only(certs):
    """Primary and replica serve only TLS. The primary (no --dir: its
    in-memory backlog feeds the link) requires client certificates and a
    password: the replica shows its tls-client-cert-file and sends
    masterauth over the session. Keys written before (full resync) and
    after reach it; it announces its TLS port."""
    primary = TlsOnlyServer(None, certs, password="s3cret", tls_args=[
        "--tls-ca-cert-file", certs("ca.crt"), "--tls-auth-clients", "yes",
        "--requirepass", "s3cret"])
    replica = TlsOnlyServer(None, certs, tls_args=[
        "--tls-ca-cert-file", certs("ca.crt"),
        "--tls-client-cert-file", certs("client.crt"),
        "--tls-client-key-file", certs("client.key"),
        "--tls-replication", "yes", "--masterauth", "s3cret"])
    try:
        primary.start()
        p = primary.client()
        for i in range(500):
            p.set(f"before:{i}", i)
        replica.persist_args = ["--replicaof", f"127.0.0.1:{primary.tls_port}"]
        replica.start()
        r = replica.client()
        assert r.config_get("tls-replication") == {"tls-replication": "yes"}
        wait_for(lambda: replication_info(replica)["master_link_status"] == "up",
                 what="the TLS link")
        for i in range(500):
            p.set(f"after:{i}", i)
        p.hset("h", mapping={"a": 1, "b": 2})
        assert p.execute_command("WAIT", 1, 10000) == 1
        assert r.get("before:499") == "499" and r.get("after:499") == "499"
        assert r.hgetall("h") == {"a": "1", "b": "2"}
        assert r.dbsize() == p.dbsize() == 1001
        info = replication_info(primary)
        assert info["slave0"]["port"] == replica.tls_port
        assert "full resync" in replica.text()
        with pytest.raises(redis.ReadOnlyError):
            r.set("x", 1)
    finally:
        replica.stop()
        primary.stop()


def test_a_tls_link_cut_by_a_crash_resumes_partially(certs, tmp_path):
    """A primary with a log directory and a snapshot (the full resync
    streams it over TLS); the replica SIGKILLed under writes and started
    again on its segment resumes with a partial resync, no gap, no
    duplicate."""
    tls = ["--tls-ca-cert-file", certs("ca.crt")]
    primary = TlsOnlyServer(tmp_path / "p", certs, tls_args=tls)
    replica = TlsOnlyServer(tmp_path / "r", certs, tls_args=tls + [
        "--tls-replication", "yes"])
    try:
        primary.start()
        p = primary.client()
        for i in range(200):
            p.incr(f"ctr{i % 20}")
        p.save()
        replica.persist_args = ["--replicaof", f"127.0.0.1:{primary.tls_port}"]
        replica.start()
        assert p.execute_command("WAIT", 1, 10000) == 1
        assert "full resync" in replica.text()
        replica.kill_all()
        counts = {}
        for i in range(2000):
            counts[f"ctr{i % 20}"] = p.incr(f"ctr{i % 20}")
        replica.start(same_ports=True)
        wait_for(lambda: replication_info(replica)["master_link_status"] == "up",
                 what="the TLS link")
        assert p.execute_command("WAIT", 1, 10000) == 1
        r = replica.client()
        for key, n in counts.items():
            assert int(r.get(key)) == n == int(p.get(key))
        assert "partial resync" in replica.text()
        assert "full resync" not in replica.text()
    finally:
        replica.stop()
        primary.stop()


def test_a_primary_whose_certificate_does_not_verify_is_never_followed(certs):
    """A replica whose CA list does not vouch for the primary's certificate
    keeps its link down with the reason, and retries: once CONFIG SET gives
    it the right CA it syncs. A replica without tls-replication on a TLS
    port is told the primary closed without answering; CONFIG SET
    tls-replication yes (modifiable at run time, as in Redis) fixes it."""
    primary = TlsOnlyServer(None, certs, tls_args=[
        "--tls-ca-cert-file", certs("ca.crt"), "--tls-auth-clients", "no"])
    wrong_ca = TlsOnlyServer(None, certs, tls_args=[
        "--tls-ca-cert-file", certs("otherca.crt"), "--tls-auth-clients", "no",
        "--tls-replication", "yes"])
    plain_link = TlsOnlyServer(None, certs, tls_args=[
        "--tls-ca-cert-file", certs("ca.crt"), "--tls-auth-clients", "no"])
    try:
        primary.start()
        primary.client().set("k", "v")
        for rep in (wrong_ca, plain_link):
            rep.persist_args = ["--replicaof", f"127.0.0.1:{primary.tls_port}"]
            rep.start()
        for rep, why in ((wrong_ca, "invalid peer certificate"),
                         (plain_link, "closed the connection without answering")):
            wait_for(lambda: why in replication_info(rep).get("shoal_master_link_error", ""),
                     what=f"the link error {why!r}")
            info = replication_info(rep)
            assert info["master_link_status"] == "down"
            assert rep.client().get("k") is None
        assert "TLS handshake with 127.0.0.1:" in wrong_ca.text()
        assert "UnknownIssuer" in wrong_ca.text()
        assert replication_info(primary)["connected_slaves"] == 0
        wrong_ca.client().config_set("tls-ca-cert-file", certs("ca.crt"))
        plain_link.client().config_set("tls-replication", "yes")
        for rep in (wrong_ca, plain_link):
            wait_for(lambda: replication_info(rep)["master_link_status"] == "up",
                     what="the link once the setting is right")
            assert rep.client().get("k") == "v"
        for rep in (primary, wrong_ca, plain_link):
            assert "panicked" not in rep.text()
    finally:
        plain_link.stop()
        wrong_ca.stop()
        primary.stop()
