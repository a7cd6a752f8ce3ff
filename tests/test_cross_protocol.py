"""One item, every protocol: a value written through memcached (text, binary
or UDP), Redis, HTTP or WebSocket is read back byte for byte through each of
the others, on one shoal server with two workers (so a write and the read
after it usually land on different worker processes)."""

import asyncio
import json
import socket
import struct

import pytest
import requests
import websockets
from pymemcache.client.base import Client

pytestmark = pytest.mark.shoal_only

VALUE = bytes(range(256)) + b"\r\nEND\r\n tail"


@pytest.fixture(scope="module")
def two(request):
    from shoaltest import Server

    s = Server(workers=2).start()
    request.addfinalizer(s.stop)
    return s


@pytest.fixture
def clients(two):
    r = two.client(decode_responses=False)
    r.flushall()
    mc = Client(("127.0.0.1", two.mc_port), default_noreply=False, timeout=10)
    http = requests.Session()
    yield r, mc, http
    mc.close()
    http.close()
    r.close()


def http_url(server, path):
    return f"http://127.0.0.1:{server.http_port}{path}"


def binary_get(port, key):
    """GET over memcached's binary protocol: (flags, value) or None."""
    k = key.encode()
    header = struct.pack(">BBHBBHIIQ", 0x80, 0x00, len(k), 0, 0, 0, len(k), 0, 0)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(header + k)
        head = recv_exact(s, 24)
        _, _, _, extras, _, status, body, _, _ = struct.unpack(">BBHBBHIIQ", head)
        payload = recv_exact(s, body)
    if status == 1:
        return None
    assert status == 0, payload
    return struct.unpack(">I", payload[:4])[0], payload[extras:]


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def udp_get(port, key):
    """`get key` over UDP (one-datagram reply): the value or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(10)
        s.sendto(struct.pack(">HHHH", 7, 0, 1, 0) + f"get {key}\r\n".encode(), ("127.0.0.1", port))
        data, _ = s.recvfrom(65536)
    req_id, seq, total, _ = struct.unpack(">HHHH", data[:8])
    assert (req_id, seq, total) == (7, 0, 1)
    body = data[8:]
    if body == b"END\r\n":
        return None
    head, rest = body.split(b"\r\n", 1)
    length = int(head.split()[3])
    return rest[:length]


async def ws_json(server, *command):
    async with websockets.connect(f"ws://127.0.0.1:{server.http_port}/",
                                  subprotocols=["json"]) as ws:
        await ws.send(json.dumps(list(command)))
        return json.loads(await ws.recv())


def test_memcached_write_reads_everywhere(two, clients):
    r, mc, http = clients
    assert mc.set("item", VALUE, flags=0xFFFFFFFF)
    assert r.get("item") == VALUE
    got = http.get(http_url(two, "/item"))
    assert got.status_code == 200 and got.content == VALUE
    assert binary_get(two.mc_port, "item") == (0xFFFFFFFF, VALUE)
    assert udp_get(two.mc_port, "item") == VALUE
    # JSON carries text: bytes that are not UTF-8 become U+FFFD there, so
    # the length shows the value arrived whole.
    assert asyncio.run(ws_json(two, "STRLEN", "item")) == len(VALUE)
    assert asyncio.run(ws_json(two, "GETRANGE", "item", "-8", "-1")) == "END\r\n tail"[-8:]


def test_http_write_reads_everywhere(two, clients):
    r, mc, http = clients
    put = http.put(http_url(two, "/page.html"), data=VALUE)
    assert put.status_code in (200, 201, 204)
    assert r.get("page.html") == VALUE
    assert mc.get("page.html") == VALUE
    assert binary_get(two.mc_port, "page.html")[1] == VALUE
    got = http.get(http_url(two, "/page.html"))
    assert got.headers["Content-Type"].startswith("text/html")
    assert http.delete(http_url(two, "/page.html")).status_code == 204
    assert mc.get("page.html") is None
    assert r.exists("page.html") == 0


def test_redis_write_reads_everywhere_and_counters_agree(two, clients):
    r, mc, http = clients
    r.set("n", 41)
    assert mc.incr("n", 1) == 42
    assert http.get(http_url(two, "/?incr+n")).text == ":43\r\n"
    assert asyncio.run(ws_json(two, "INCR", "n")) == 44
    assert mc.get("n") == b"44"
    assert http.get(http_url(two, "/js?get+n")).json() == "44"


def test_websocket_write_reads_everywhere(two, clients):
    r, mc, http = clients
    assert asyncio.run(ws_json(two, "SET", "ws", "from a browser")) == "OK"
    assert mc.get("ws") == b"from a browser"
    assert http.get(http_url(two, "/ws")).content == b"from a browser"
    assert udp_get(two.mc_port, "ws") == b"from a browser"


def test_cas_sees_writes_from_other_protocols(two, clients):
    r, mc, http = clients
    mc.set("c", b"v1")
    _, cas = mc.gets("c")
    r.append("c", "+redis")
    assert mc.cas("c", b"stale", cas) is False
    assert mc.get("c") == b"v1+redis"
    _, cas = mc.gets("c")
    assert mc.cas("c", b"fresh", cas) is True
    assert r.get("c") == b"fresh"


def test_delete_and_expiry_agree(two, clients):
    r, mc, http = clients
    mc.set("t", b"x", expire=100)
    assert 98 <= r.ttl("t") <= 100
    r.persist("t")
    assert mc.touch("t", 50)
    assert 48 <= r.ttl("t") <= 50
    r.delete("t")
    assert mc.get("t") is None
    assert http.get(http_url(two, "/t")).status_code == 404
    assert binary_get(two.mc_port, "t") is None
