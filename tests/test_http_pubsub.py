"""Pub/sub over the HTTP port, on a two-worker shoal with the publisher on
the other worker than the subscriber: WebSocket `json` (messages arrive as
`{"push": [...]}` between replies), `term` (pushes print as redis-cli
prints them), Server-Sent Events at /sub/<channel> and /psub/<pattern>
(events in order, line breaks and non-UTF-8 payloads, a real subscriber
that PUBLISH and PUBSUB count and that goes when its client goes), and the
subscribing commands refused over plain HTTP requests."""

import asyncio
import json
import re
import socket
import uuid

import pytest
import redis
import requests
import websockets

from shoaltest import TARGET, Server, wait_for
from test_websocket import Term

pytestmark = [
    pytest.mark.shoal_only,
    pytest.mark.skipif(TARGET != "shoal", reason="HTTP and WebSocket are shoal's own"),
]


@pytest.fixture(scope="module")
def two():
    s = Server(workers=2).start()
    yield s
    s.stop()


def uniq():
    return f"h{uuid.uuid4().hex[:10]}"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def worker_of(info):
    m = re.search(r"\bworker=(\d+)", info)
    assert m, info
    return int(m.group(1))


def redis_on_worker(server, slot, tries=400):
    """A redis-py client whose one connection SO_REUSEPORT gave to `slot`."""
    for _ in range(tries):
        c = redis.Redis(host="127.0.0.1", port=server.port, decode_responses=True,
                        single_connection_client=True, socket_timeout=30)
        if worker_of(c.execute_command("CLIENT", "INFO")) == slot:
            return c
        c.close()
    raise AssertionError(f"no connection reached worker {slot} in {tries} tries")


def client_line(server, addr):
    """The CLIENT LIST line (from any worker) of the client at `addr`."""
    with redis.Redis(host="127.0.0.1", port=server.port, decode_responses=True,
                     socket_timeout=30) as c:
        for line in c.execute_command("CLIENT", "LIST").splitlines():
            if f" addr={addr} " in line:
                return line
    return None


def numsub(server, channel):
    with redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=30) as c:
        return dict(c.pubsub_numsub(channel))[channel.encode()]


# -- WebSocket json ------------------------------------------------------------


async def ws_json(server):
    ws = await websockets.connect(f"ws://127.0.0.1:{server.http_port}/", subprotocols=["json"])
    await ws.send(json.dumps(["CLIENT", "INFO"]))
    return ws, worker_of(json.loads(await ws.recv()))


async def recv(ws):
    return json.loads(await ws.recv())


def test_websocket_json_gets_pushes_published_on_the_other_worker(two):
    ch, other = uniq(), uniq()

    async def go():
        ws, slot = await ws_json(two)
        pub = await asyncio.to_thread(redis_on_worker, two, 1 - slot)
        await ws.send(json.dumps(["SUBSCRIBE", ch, other]))
        # The confirmations are the command's replies: plain arrays.
        assert await recv(ws) == ["subscribe", ch, 1]
        assert await recv(ws) == ["subscribe", other, 2]
        assert pub.publish(ch, "one") == 1
        assert pub.publish(other, "two\nlines") == 1
        assert pub.publish(ch, b"bin\xff") == 1
        assert await recv(ws) == {"push": ["message", ch, "one"]}
        assert await recv(ws) == {"push": ["message", other, "two\nlines"]}
        assert await recv(ws) == {"push": ["message", ch, "bin\ufffd"]}
        # Replies and pushes interleave; a refusal still comes in its turn.
        await ws.send(json.dumps(["PING"]))
        await ws.send("not a command")
        assert await recv(ws) == ["pong", ""]
        assert "error" in await recv(ws)
        await ws.send(json.dumps(["PSUBSCRIBE", ch[:4] + "*"]))
        assert await recv(ws) == ["psubscribe", ch[:4] + "*", 3]
        assert pub.publish(ch, "both") == 2
        got = [await recv(ws), await recv(ws)]
        assert {"push": ["message", ch, "both"]} in got
        assert {"push": ["pmessage", ch[:4] + "*", ch, "both"]} in got
        await ws.send(json.dumps(["UNSUBSCRIBE", ch]))
        assert await recv(ws) == ["unsubscribe", ch, 2]
        await ws.send(json.dumps(["PUNSUBSCRIBE"]))
        assert await recv(ws) == ["punsubscribe", ch[:4] + "*", 1]
        assert pub.publish(ch, "nobody") == 0
        assert pub.publish(other, "last") == 1
        assert await recv(ws) == {"push": ["message", other, "last"]}
        await ws.close()
        await asyncio.to_thread(wait_for, lambda: numsub(two, other) == 0,
                                what="the closed WebSocket leaving NUMSUB")
        pub.close()
    run(go())


def test_websocket_json_resp3_pushes_and_replies_that_look_like_them(two):
    ch = uniq()

    async def go():
        ws, slot = await ws_json(two)
        pub = await asyncio.to_thread(redis_on_worker, two, 1 - slot)
        pub.rpush(ch + ":list", "message", ch, "not a push")
        await ws.send(json.dumps(["HELLO", "3"]))
        assert (await recv(ws))["proto"] == 3
        await ws.send(json.dumps(["SUBSCRIBE", ch]))
        assert await recv(ws) == ["subscribe", ch, 1]
        assert pub.publish(ch, "hi") == 1
        assert await recv(ws) == {"push": ["message", ch, "hi"]}
        # RESP3 runs any command while subscribed; an array reply shaped
        # like a message is a reply, not a push.
        await ws.send(json.dumps(["LRANGE", ch + ":list", 0, -1]))
        assert await recv(ws) == ["message", ch, "not a push"]
        await ws.send(json.dumps(["SET", ch + ":k", "v"]))
        assert await recv(ws) == "OK"
        assert pub.publish(ch, "again") == 1
        assert await recv(ws) == {"push": ["message", ch, "again"]}
        await ws.close()
        pub.close()
    run(go())


# -- WebSocket term --------------------------------------------------------------


def test_term_prints_pushes_as_they_arrive(two):
    ch = uniq()

    async def go():
        ws = await websockets.connect(f"ws://127.0.0.1:{two.http_port}/", subprotocols=["term"])
        t = Term(ws)
        await t.read_until_prompt()
        info = await t.run("client info\r")
        pub = await asyncio.to_thread(redis_on_worker, two, 1 - worker_of(info[0]))
        assert await t.run(f"subscribe {ch}\r") == ['1) "subscribe"', f'2) "{ch}"', "3) (integer) 1"]
        # A message prints as redis-cli prints it in subscribed mode, with
        # the prompt drawn again below it.
        start = t.screen.row
        assert pub.publish(ch, 'say "hi"\n') == 1
        await t.read_until_prompt()
        assert t.screen.rows[start:t.screen.row] == [
            '1) "message"', f'2) "{ch}"', '3) "say \\"hi\\"\\n"']
        # The line being typed survives a message arriving.
        for key in "pi":
            await ws.send(key)
            t.screen.feed(await ws.recv())
        start = t.screen.row
        assert pub.publish(ch, "second") == 1
        while t.screen.row == start or t.screen.rows[t.screen.row] != "shoal> pi":
            t.screen.feed(await ws.recv())
        assert t.screen.rows[start:t.screen.row] == ['1) "message"', f'2) "{ch}"', '3) "second"']
        # And the console stays usable while subscribed.
        assert await t.run("ng\r") == ['1) "pong"', '2) ""']
        assert await t.run(f"unsubscribe {ch}\r") == [
            '1) "unsubscribe"', f'2) "{ch}"', "3) (integer) 0"]
        assert await t.run("get nokey\r") == ["(nil)"]
        await ws.close()
        pub.close()
    run(go())


# -- Server-Sent Events ------------------------------------------------------------


class Events:
    """An event stream read over a raw socket, parsed by the HTML standard's
    rules (comments skipped, `data:` lines joined with LF, one leading
    space after the colon dropped)."""

    def __init__(self, server, path, headers=""):
        self.sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=30)
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.http_port}\r\n"
                          f"{headers}\r\n".encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
        host, port = self.sock.getsockname()
        self.addr = f"{host}:{port}"

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("the stream ended")
        self.buf += data

    def _line(self):
        while b"\n" not in self.buf:
            self._more()
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8")  # strict: the stream must be UTF-8

    def event(self):
        kind, data = "", []
        while True:
            line = self._line()
            if line == "":
                if data:
                    return kind or "message", "\n".join(data)
                kind = ""
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                kind = value
            elif field == "data":
                data.append(value)

    def ended(self):
        """Whether the server closed the stream (reads what is left)."""
        try:
            while True:
                self._more()
        except EOFError:
            return True

    def close(self):
        self.sock.close()


def publisher_for(server, addr):
    """A redis-py client on the other worker than the client at `addr`."""
    line = wait_for(lambda: client_line(server, addr), what="the subscriber in CLIENT LIST")
    return redis_on_worker(server, 1 - worker_of(line))


def test_sse_events_arrive_in_order(two):
    ch = uniq()
    es = Events(two, f"/sub/{ch}")
    try:
        assert es.status == 200
        assert es.headers["content-type"] == "text/event-stream"
        assert es.headers["cache-control"] == "no-cache"
        assert "content-length" not in es.headers
        pub = publisher_for(two, es.addr)
        payloads = [b"one", b"two\nlines", b"crlf\r\nand\rcr", b"", b"trailing\n",
                    b" leading space", b"data: inside", b"bin\xff\xfeary", "é ü".encode()]
        for p in payloads:
            assert pub.publish(ch, p) == 1
        expected = ["one", "two\nlines", "crlf\nand\ncr", "", "trailing\n", " leading space",
                    "data: inside", "bin\ufffd\ufffdary", "é ü"]
        assert [es.event() for _ in expected] == [("message", e) for e in expected]
        for i in range(200):
            pub.publish(ch, f"m{i}")
        assert [es.event()[1] for _ in range(200)] == [f"m{i}" for i in range(200)]
        pub.close()
    finally:
        es.close()


def test_sse_subscriber_is_counted_and_goes_with_its_client(two):
    ch = uniq()
    es = Events(two, f"/sub/{ch}")
    pub = publisher_for(two, es.addr)
    try:
        assert numsub(two, ch) == 1
        line = client_line(two, es.addr)
        assert " sub=1 " in line and " cmd=subscribe " in line
        assert pub.publish(ch, "x") == 1
        assert es.event() == ("message", "x")
        # A second stream on the same channel is a second subscriber.
        es2 = Events(two, f"/sub/{ch}")
        assert numsub(two, ch) == 2
        assert pub.publish(ch, "y") == 2
        assert es.event() == ("message", "y") and es2.event() == ("message", "y")
        es2.close()
        wait_for(lambda: numsub(two, ch) == 1, what="NUMSUB after one client left")
    finally:
        es.close()
    wait_for(lambda: numsub(two, ch) == 0, what="NUMSUB after the client left")
    assert pub.publish(ch, "nobody") == 0
    pub.close()


def test_sse_pattern_stream(two):
    prefix = uniq()
    es = Events(two, f"/psub/{prefix}.*")
    pub = publisher_for(two, es.addr)
    try:
        assert es.status == 200
        line = client_line(two, es.addr)
        assert " psub=1 " in line
        assert pub.publish(f"{prefix}.a", "1") == 1
        assert pub.publish(f"{prefix}.b", "two\nlines") == 1
        assert pub.publish(f"{prefix}x", "not matched") == 0
        assert es.event() == ("message", json.dumps([f"{prefix}.a", "1"], separators=(",", ":")))
        kind, data = es.event()
        assert kind == "message" and json.loads(data) == [f"{prefix}.b", "two\nlines"]
    finally:
        es.close()
    pub.close()


def test_sse_channel_names_are_percent_decoded(two):
    ch = uniq() + "/a b+c"
    es = Events(two, f"/sub/{ch.replace(' ', '%20')}?ignored=1")
    pub = publisher_for(two, es.addr)
    try:
        assert numsub(two, ch) == 1
        assert pub.publish(ch, "ok") == 1
        assert es.event() == ("message", "ok")
    finally:
        es.close()
    pub.close()


def test_sse_with_requests_streaming(two):
    ch = uniq()
    url = f"http://127.0.0.1:{two.http_port}/sub/{ch}"
    with requests.get(url, stream=True, timeout=30,
                      headers={"Sec-Fetch-Site": "cross-site"}) as resp:
        assert resp.status_code == 200
        assert resp.headers["Content-Type"] == "text/event-stream"
        with redis.Redis(host="127.0.0.1", port=two.port, socket_timeout=30) as pub:
            assert pub.publish(ch, "a\nb") == 1
            assert pub.publish(ch, "c") == 1
        # One byte at a time: a larger chunk would wait for more bytes than
        # the stream has sent yet.
        lines = resp.iter_lines(chunk_size=1, decode_unicode=True)
        assert [next(lines) for _ in range(7)] == [
            "event: message", "data: a", "data: b", "", "event: message", "data: c", ""]


def test_client_kill_ends_the_stream(two):
    ch = uniq()
    es = Events(two, f"/sub/{ch}")
    try:
        with redis.Redis(host="127.0.0.1", port=two.port, socket_timeout=30) as c:
            wait_for(lambda: client_line(two, es.addr), what="the subscriber in CLIENT LIST")
            assert c.execute_command("CLIENT", "KILL", "ADDR", es.addr) == 1
        assert es.ended()
        assert numsub(two, ch) == 0
    finally:
        es.close()


def test_a_stream_that_is_not_read_is_cut_off_by_the_pubsub_limit(two):
    ch = uniq()
    with redis.Redis(host="127.0.0.1", port=two.port, decode_responses=True,
                     socket_timeout=30) as c:
        old = c.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
        c.config_set("client-output-buffer-limit", "pubsub 256kb 0 0")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    try:
        sock.connect(("127.0.0.1", two.http_port))
        sock.sendall(f"GET /sub/{ch} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        wait_for(lambda: numsub(two, ch) == 1, what="the stream subscribed")
        with redis.Redis(host="127.0.0.1", port=two.port, socket_timeout=30) as pub:
            big = b"x" * 64 * 1024
            sent = 0
            # The publisher never waits for the subscriber: it goes on until
            # the subscriber is cut off (bounded: 64 MiB at most).
            while numsub(two, ch) == 1 and sent < 1024:
                pub.publish(ch, big)
                sent += 1
            assert numsub(two, ch) == 0, "the stream was never cut off"
            assert pub.publish(ch, "after") == 0
        # The stream ends once what was sent is read.
        while sock.recv(1 << 20):
            pass
    finally:
        sock.close()
        with redis.Redis(host="127.0.0.1", port=two.port, socket_timeout=30) as c:
            c.config_set("client-output-buffer-limit", old)


def test_an_idle_stream_gets_a_heartbeat_comment(two):
    # The server sends it after 15 s without an event; the read waits for it
    # (bounded), it does not time it.
    es = Events(two, f"/sub/{uniq()}")
    es.sock.settimeout(60)
    try:
        assert es._line() == ": heartbeat"
        assert es._line() == ""
    finally:
        es.close()


def test_the_stream_ends_when_the_worker_drains(make_server):
    s = make_server(workers=1)
    es = Events(s, f"/sub/{uniq()}")
    try:
        assert es.status == 200
        s.stop()
        assert es.ended()
    finally:
        es.close()


def test_head_and_other_methods(two):
    ch = uniq()
    base = f"http://127.0.0.1:{two.http_port}"
    r = requests.head(f"{base}/sub/{ch}", timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
    assert numsub(two, ch) == 0
    for method in ("PUT", "POST", "DELETE"):
        r = requests.request(method, f"{base}/sub/{ch}", timeout=30)
        assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"


# -- plain HTTP requests ---------------------------------------------------------------


def test_subscribing_over_a_plain_request_is_refused(two):
    ch = uniq()
    base = f"http://127.0.0.1:{two.http_port}"
    r = requests.get(f"{base}/?subscribe+{ch}", timeout=30)
    assert r.status_code == 200
    assert r.text.startswith("-ERR 'subscribe' pushes messages, which an HTTP request cannot carry")
    for verb in ("psubscribe", "ssubscribe", "monitor"):
        r = requests.get(f"{base}/js?{verb}+{ch}" if verb != "monitor" else f"{base}/js?monitor",
                         timeout=30)
        assert r.json()["error"].startswith(f"ERR '{verb}' pushes messages"), verb
    assert numsub(two, ch) == 0
    # Publishing and counting work as any command.
    assert requests.get(f"{base}/?publish+{ch}+hi", timeout=30).text == ":0\r\n"
    assert requests.get(f"{base}/js?pubsub+numsub+{ch}", timeout=30).json() == [ch, 0]
