"""HTTP access with real clients (curl and Python requests, plus a raw socket
where the bytes on the wire matter): commands in the URI as RESP text and
JSON, raw values with MIME types, keep-alive and pipelining, limits, and
/health and /metrics."""

import re
import socket
import subprocess

import pytest
import requests

from shoaltest import TARGET, wait_for

pytestmark = [
    pytest.mark.shoal_only,
    pytest.mark.skipif(TARGET != "shoal", reason="HTTP is shoal's own"),
]

INDEX = b"<h1>hello from shoal, 42 bytes long.</h1>\n"


@pytest.fixture
def base(server, r):
    """The HTTP base URL of the shared server, on an emptied store."""
    return f"http://127.0.0.1:{server.http_port}"


def curl(*args):
    p = subprocess.run(["curl", "-s", *args], capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


class Wire:
    """A raw HTTP/1.1 connection: `send` bytes, `response()` reads one
    response (head fields and body by Content-Length)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        fields = {}
        for line in lines[1:]:
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.strip()
        n = int(fields.get("content-length", 0))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, fields, body

    def closed(self):
        """Whether the server closed the connection (after any data left)."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


@pytest.fixture
def wire(server, r):
    w = Wire(server.http_port)
    yield w
    w.close()


# -- commands in the URI ---------------------------------------------------


def test_commands_reply_in_resp_text(base, r):
    resp = requests.get(f"{base}/?set+greeting+hello")
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "text/plain"
    assert resp.content == b"+OK\r\n"
    assert requests.get(f"{base}/?get+greeting").content == b"$5\r\nhello\r\n"
    assert requests.get(f"{base}/?get+nokey").content == b"$-1\r\n"
    assert r.get("greeting") == "hello"
    assert curl(f"{base}/?incr+counter") == b":1\r\n"
    assert curl(f"{base}/?nosuch+a").startswith(b"-ERR unknown command 'nosuch'")


def test_commands_reply_in_json(base, r):
    r.rpush("l", "a", "b", "c")
    r.hset("h", "f", "v")
    js = lambda q: requests.get(f"{base}/js?{q}")
    resp = js("lrange+l+0+-1")
    assert resp.headers["Content-Type"] == "application/json"
    assert resp.json() == ["a", "b", "c"]
    assert js("get+nokey").json() is None
    assert js("llen+l").json() == 3
    assert js("set+k+v").json() == "OK"
    assert js("hgetall+h").json() == ["f", "v"]
    err = js("get+l").json()
    assert err == {"error": "WRONGTYPE Operation against a key holding the wrong kind of value"}
    assert js("lpop+l+0").json() == []


def test_resp3_over_one_connection_gives_json_objects(base, r):
    r.hset("h", mapping={"a": "1", "b": "2"})
    r.zadd("z", {"m": 1.5})
    with requests.Session() as s:
        hello = s.get(f"{base}/js?hello+3").json()
        assert hello["proto"] == 3
        assert s.get(f"{base}/js?hgetall+h").json() == {"a": "1", "b": "2"}
        assert s.get(f"{base}/js?zscore+z+m").json() == 1.5
        assert s.get(f"{base}/?zscore+z+m").content == b",1.5\r\n"
        assert s.get(f"{base}/js?get+nokey").json() is None


def test_arguments_are_url_decoded(base, r):
    requests.get(f"{base}/?set+plus+a%2Bb")
    requests.get(f"{base}/?set+space+hello%20world")
    requests.get(f"{base}/?set+caf%C3%A9+%E2%82%AC")
    requests.get(f"{base}/?set+empty+")
    assert r.get("plus") == "a+b"
    assert r.get("space") == "hello world"
    assert r.get("café") == "€"
    assert r.get("empty") == ""
    # requests would re-encode a bad escape: curl sends it as given.
    assert curl("-o", "/dev/null", "-w", "%{http_code}", f"{base}/?get+%zz") == b"400"
    assert curl("-o", "/dev/null", "-w", "%{http_code}", f"{base}/js?") == b"400"


def test_a_session_lasts_across_keep_alive_requests(base, r):
    with requests.Session() as s:
        first = s.get(f"{base}/?client+id").content
        assert s.get(f"{base}/?client+id").content == first
        assert s.get(f"{base}/?multi").content == b"+OK\r\n"
        assert s.get(f"{base}/?incr+n").content == b"+QUEUED\r\n"
        assert s.get(f"{base}/?incr+n").content == b"+QUEUED\r\n"
        assert s.get(f"{base}/js?exec").json() == [1, 2]
        assert s.get(f"{base}/?select+3").content == b"+OK\r\n"
        s.get(f"{base}/?set+k+in3")
    assert r.get("k") is None
    assert r.execute_command("SELECT", 3) and r.get("k") == "in3"


def test_blocking_commands_answer_at_once_as_timed_out(base, r):
    assert requests.get(f"{base}/?blpop+empty+0", timeout=10).content == b"*-1\r\n"
    assert requests.get(f"{base}/js?brpop+empty+5", timeout=10).json() is None
    r.rpush("full", "x")
    assert requests.get(f"{base}/js?blpop+full+0", timeout=10).json() == ["full", "x"]


def test_writes_over_http_wake_blocked_resp_clients(server, base, r):
    import threading

    blocked = server.client()
    got = []
    t = threading.Thread(target=lambda: got.append(blocked.blpop("q", 10)))
    t.start()
    wait_for(lambda: "blpop" in r.execute_command("CLIENT", "LIST"), what="BLPOP waiting")
    requests.get(f"{base}/?rpush+q+job")
    t.join(15)
    assert got == [("q", "job")]
    blocked.close()


def test_client_list_and_quit(base, wire):
    listing = requests.get(f"{base}/?client+list").content
    assert listing.startswith(b"$") and b" cmd=client|list " in listing
    wire.send(b"GET /?quit HTTP/1.1\r\nHost: x\r\n\r\n")
    status, fields, body = wire.response()
    assert (status, body) == (200, b"+OK\r\n")
    assert fields["connection"] == "close"
    assert wire.closed()


def test_command_uris_take_only_get(base):
    resp = requests.post(f"{base}/?set+k+v")
    assert resp.status_code == 405
    assert resp.headers["Allow"] == "GET"


# -- raw values -------------------------------------------------------------


def test_put_then_get_index_html(base, r):
    resp = requests.put(f"{base}/index.html", data=INDEX)
    assert resp.status_code == 201
    assert requests.put(f"{base}/index.html", data=INDEX).status_code == 204
    resp = requests.get(f"{base}/index.html")
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "text/html"
    assert resp.headers["Content-Length"] == "42"
    assert resp.content == INDEX
    assert requests.get(f"{base}/").content == INDEX
    assert r.get("index.html") == INDEX.decode()
    assert curl(f"{base}/index.html") == INDEX


def test_post_sets_and_delete_removes(base, r):
    assert requests.post(f"{base}/notes/today.txt", data=b"buy milk").status_code == 201
    assert r.get("notes/today.txt") == "buy milk"
    assert requests.delete(f"{base}/notes/today.txt").status_code == 204
    assert requests.delete(f"{base}/notes/today.txt").status_code == 404
    assert requests.get(f"{base}/notes/today.txt").status_code == 404


@pytest.mark.parametrize("key, mime", [
    ("a.html", "text/html"), ("style.css", "text/css"),
    ("app.js", "application/javascript"), ("data.json", "application/json"),
    ("logo.png", "image/png"), ("photo.JPG", "image/jpeg"), ("anim.gif", "image/gif"),
    ("icon.svg", "image/svg+xml"), ("favicon.ico", "image/x-icon"),
    ("mod.wasm", "application/wasm"), ("readme.txt", "text/plain"),
    ("blob", "application/octet-stream"), ("x.unknown", "application/octet-stream"),
])
def test_content_type_follows_the_extension(base, r, key, mime):
    r.set(key, "x")
    assert requests.get(f"{base}/{key}").headers["Content-Type"] == mime


def test_binary_values_and_encoded_keys(base, rb):
    value = bytes(range(256)) * 4
    assert requests.put(f"{base}/bin%20key%2Fwith.dat", data=value).status_code == 201
    assert rb.get(b"bin key/with.dat") == value
    resp = requests.get(f"{base}/bin%20key%2Fwith.dat")
    assert resp.content == value
    assert resp.headers["Content-Type"] == "application/octet-stream"


def test_head_gives_the_length_without_the_body(base, r):
    r.set("page.html", "x" * 100)
    resp = requests.head(f"{base}/page.html")
    assert resp.status_code == 200
    assert resp.headers["Content-Length"] == "100"
    assert resp.content == b""
    out = curl("-I", f"{base}/page.html").decode()
    assert out.startswith("HTTP/1.1 200 OK") and "Content-Length: 100" in out
    assert requests.head(f"{base}/nope").status_code == 404


def test_a_key_of_another_type_is_409_without_resp(base, r):
    r.rpush("list.json", "a")
    resp = requests.get(f"{base}/list.json")
    assert resp.status_code == 409
    assert resp.headers["Content-Type"] == "text/plain"
    assert resp.text == "WRONGTYPE Operation against a key holding the wrong kind of value\n"


def test_other_methods_are_405_with_allow(base):
    for method in ("PATCH", "OPTIONS"):
        resp = requests.request(method, f"{base}/k")
        assert resp.status_code == 405
        assert resp.headers["Allow"] == "GET, HEAD, PUT, POST, DELETE"
    resp = requests.put(f"{base}/health", data=b"x")
    assert resp.status_code == 405 and resp.headers["Allow"] == "GET, HEAD"


def test_chunked_and_expect_continue_uploads(base, r):
    resp = requests.put(f"{base}/chunked.txt", data=iter([b"hello ", b"chunked ", b"world"]))
    assert resp.status_code == 201
    assert r.get("chunked.txt") == "hello chunked world"
    big = b"y" * 200_000
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
                        "-H", "Expect: 100-continue", "--data-binary", "@-",
                        f"{base}/big.bin"], input=big, capture_output=True, timeout=30)
    assert p.stdout == b"201"
    assert len(r.get("big.bin")) == len(big)


def test_cross_site_browser_requests_may_not_run_commands(base, r):
    cross = {"Sec-Fetch-Site": "cross-site"}
    assert requests.get(f"{base}/?flushall", headers=cross).status_code == 403
    assert requests.put(f"{base}/k", data=b"v", headers=cross).status_code == 403
    r.set("page.html", "ok")
    assert requests.get(f"{base}/page.html", headers=cross).status_code == 200
    assert requests.get(f"{base}/?get+k", headers={"Sec-Fetch-Site": "same-origin"}).ok


# -- the connection -------------------------------------------------------


def test_pipelined_requests_are_answered_in_order(wire, r):
    r.set("a", "1")
    r.set("b.txt", "two")
    wire.send(b"GET /?get+a HTTP/1.1\r\nHost: x\r\n\r\n"
              b"GET /b.txt HTTP/1.1\r\nHost: x\r\n\r\n"
              b"PUT /c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
              b"GET /js?mget+a+b.txt+c HTTP/1.1\r\nHost: x\r\n\r\n")
    assert wire.response()[::2] == (200, b"$1\r\n1\r\n")
    assert wire.response()[::2] == (200, b"two")
    assert wire.response()[0] == 201
    assert wire.response()[::2] == (200, b'["1","two","abc"]')
    wire.sock.settimeout(0.3)
    assert not wire.closed()


def test_a_request_split_across_writes(wire, r):
    r.set("k", "v")
    request = b"GET /?get+k HTTP/1.1\r\nHost: x\r\n\r\n"
    for i in range(len(request)):
        wire.send(request[i:i + 1])
    assert wire.response()[::2] == (200, b"$1\r\nv\r\n")


def test_http10_closes_unless_keep_alive(server, r):
    w = Wire(server.http_port)
    w.send(b"GET /health HTTP/1.0\r\n\r\n")
    status, fields, body = w.response()
    assert (status, body, fields["connection"]) == (200, b"OK", "close")
    assert w.closed()
    w.close()
    w = Wire(server.http_port)
    w.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    status, fields, _ = w.response()
    assert fields["connection"] == "keep-alive"
    w.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    assert w.response()[0] == 200
    w.close()


def test_connection_close_is_honoured(wire):
    wire.send(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    status, fields, _ = wire.response()
    assert status == 200 and fields["connection"] == "close"
    assert wire.closed()


def test_malformed_requests_get_400_and_close(server, r):
    for bad in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n",
                b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
                b"PUT /k HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"PUT /k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
        w = Wire(server.http_port)
        w.send(bad)
        status, fields, _ = w.response()
        assert status == 400, bad
        assert fields["connection"] == "close"
        assert w.closed()
        w.close()


def test_limits_give_414_431_and_413(server, base, r):
    resp = requests.get(f"{base}/?set+k+{'v' * 9000}")
    assert resp.status_code == 414
    resp = requests.get(f"{base}/health", headers={"X-Big": "b" * 9000})
    assert resp.status_code == 431
    many = {f"X-H{i}": "1" for i in range(120)}
    assert requests.get(f"{base}/health", headers=many).status_code == 431
    assert requests.put(f"{base}/big", data=b"z" * (1 << 20)).status_code == 201
    resp = requests.put(f"{base}/big", data=b"z" * ((1 << 20) + 1))
    assert resp.status_code == 413
    w = Wire(server.http_port)
    w.send(b"PUT /k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           + b"100001\r\n")
    assert w.response()[0] == 413
    w.close()
    # The worker is fine.
    assert requests.get(f"{base}/health").status_code == 200


def test_other_http_versions_get_505(wire):
    wire.send(b"GET / HTTP/2.0\r\nHost: x\r\n\r\n")
    assert wire.response()[0] == 505


def test_absolute_form_targets(wire, r):
    r.set("k", "v")
    wire.send(b"GET http://127.0.0.1/k HTTP/1.1\r\nHost: x\r\n\r\n")
    assert wire.response()[::2] == (200, b"v")


def test_bad_input_never_takes_the_worker_down(server, base, r):
    import random

    rng = random.Random(5)
    for _ in range(200):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        if rng.random() < 0.5:
            junk = b"GET /" + junk
        try:
            with socket.create_connection(("127.0.0.1", server.http_port), timeout=2) as s:
                s.sendall(junk + b"\r\n\r\n")
                s.recv(4096)
        except OSError:
            pass
    assert requests.get(f"{base}/health").text == "OK"
    assert r.ping()


# -- /health and /metrics -----------------------------------------------------


def test_health(base):
    resp = requests.get(f"{base}/health")
    assert (resp.status_code, resp.text) == (200, "OK")


def parse_metrics(text):
    """{(name, labels): value} from the exposition format; checks that every
    sample's family has HELP and TYPE lines before it."""
    families, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            families.setdefault(line.split()[2], set()).add("help")
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert kind in ("counter", "gauge")
            families.setdefault(name, set()).add("type")
        elif line:
            m = re.fullmatch(r'([a-z_]+)(\{[^}]*\})? (\S+)', line)
            assert m, line
            name, labels, value = m.groups()
            assert families.get(name) == {"help", "type"}, name
            samples[(name, labels or "")] = float(value)
    return samples


def test_metrics_in_prometheus_format(base, r):
    r.set("a", "1")
    r.set("b", "2", ex=100)
    resp = requests.get(f"{base}/metrics")
    assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    m = parse_metrics(resp.text)
    assert m[("shoal_keys", '{db="0"}')] == 2
    assert m[("shoal_expiring_keys", '{db="0"}')] == 1
    assert m[("shoal_connections", '{worker="0"}')] >= 2
    assert m[("shoal_memory_used_bytes", "")] > 0
    commands = m[("shoal_commands_total", '{worker="0"}')]
    for _ in range(5):
        requests.get(f"{base}/?ping")
    m = parse_metrics(requests.get(f"{base}/metrics").text)
    assert m[("shoal_commands_total", '{worker="0"}')] >= commands + 5
    assert ("shoal_keyspace_hits_total", "") in m


def test_metrics_label_every_worker(make_server):
    s = make_server(workers=2)
    base = f"http://127.0.0.1:{s.http_port}"
    text = wait_for(lambda: (lambda t: 'worker="1"' in t and t)(requests.get(f"{base}/metrics").text),
                    what="both workers registered")
    m = parse_metrics(text)
    assert ("shoal_commands_total", '{worker="0"}') in m
    assert ("shoal_commands_total", '{worker="1"}') in m
    assert m[("shoal_workers", "")] == 2
    # Every worker answers HTTP on the shared port.
    for _ in range(10):
        assert requests.get(f"{base}/health", headers={"Connection": "close"}).text == "OK"
