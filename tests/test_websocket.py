"""WebSocket on the HTTP port with the `websockets` package: the `resp`,
`json` and `term` sub-protocols (term's replies compared with redis-cli's
own terminal output), the handshake's refusals, close codes, and frames a
well-behaved client would never send (over a raw socket)."""

import asyncio
import base64
import json
import os
import re
import socket
import struct
import subprocess

import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from shoaltest import TARGET, wait_for

pytestmark = [
    pytest.mark.shoal_only,
    pytest.mark.skipif(TARGET != "shoal", reason="WebSocket is shoal's own"),
]


@pytest.fixture
def url(server, r):
    return f"ws://127.0.0.1:{server.http_port}/"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def recv_resp(ws, expected_len):
    """Binary frames until `expected_len` bytes arrived (RESP is a stream)."""
    data = b""
    while len(data) < expected_len:
        frame = await ws.recv()
        assert isinstance(frame, bytes)
        data += frame
    return data


# -- resp ---------------------------------------------------------------


def test_resp_subprotocol(url, r):
    async def go():
        async with websockets.connect(url, subprotocols=["resp"]) as ws:
            assert ws.subprotocol == "resp"
            await ws.send(b"*1\r\n$4\r\nPING\r\n")
            assert await ws.recv() == b"+PONG\r\n"
            # Two commands in one message, then one split over two.
            await ws.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
            assert await recv_resp(ws, 12) == b"+OK\r\n$1\r\nv\r\n"
            await ws.send(b"*2\r\n$4\r\nECHO\r\n$5\r\nhel")
            await ws.send("lo\r\n")
            assert await ws.recv() == b"$5\r\nhello\r\n"
            # A reply larger than the pipe's buffer comes in several frames.
            big = "x" * 300_000
            r.set("big", big)
            await ws.send(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n")
            expected = b"$300000\r\n" + big.encode() + b"\r\n"
            assert await recv_resp(ws, len(expected)) == expected
    run(go())


def test_no_subprotocol_means_resp(url):
    async def go():
        async with websockets.connect(url) as ws:
            assert ws.subprotocol is None
            await ws.send(b"PING\r\n")
            assert await ws.recv() == b"+PONG\r\n"
    run(go())


def test_resp_sessions_have_hello_multi_and_blocking(url, server, r):
    async def go():
        async with websockets.connect(url, subprotocols=["resp"]) as ws:
            await ws.send(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
            hello = await ws.recv()
            assert hello.startswith(b"%7\r\n") and b"proto\r\n:3\r\n" in hello
            await ws.send(b"MULTI\r\nINCR n\r\nINCR n\r\nEXEC\r\n")
            expected = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:2\r\n"
            assert await recv_resp(ws, len(expected)) == expected
            # BLPOP waits until a RESP client on another connection pushes.
            await ws.send(b"BLPOP q 0\r\n")
            await asyncio.to_thread(wait_for, lambda: "blpop" in r.execute_command("CLIENT", "LIST"),
                                    what="BLPOP waiting")
            r.rpush("q", "job")
            expected = b"*2\r\n$1\r\nq\r\n$3\r\njob\r\n"
            assert await recv_resp(ws, len(expected)) == expected
    run(go())


# -- json -----------------------------------------------------------------


def test_json_subprotocol(url, r):
    async def go():
        async with websockets.connect(url, subprotocols=["json"]) as ws:
            assert ws.subprotocol == "json"

            async def cmd(*args):
                await ws.send(json.dumps(args))
                return json.loads(await ws.recv())

            assert await cmd("SET", "k", "v") == "OK"
            assert await cmd("GET", "k") == "v"
            assert await cmd("GET", "nokey") is None
            assert await cmd("RPUSH", "l", "a", "b") == 2
            assert await cmd("LRANGE", "l", 0, -1) == ["a", "b"]
            assert await cmd("EXPIRE", "k", 100) == 1
            assert await cmd("GET", "l") == {
                "error": "WRONGTYPE Operation against a key holding the wrong kind of value"}
            r.hset("h", "f", "1")
            assert await cmd("HGETALL", "h") == ["f", "1"]
            assert (await cmd("HELLO", "3"))["proto"] == 3
            assert await cmd("HGETALL", "h") == {"f": "1"}
            r.set("bin", b"a\xffb")
            assert await cmd("GET", "bin") == "a\ufffdb"
            # A fragmented message is one command.
            await ws.send(['["GE', 'T","k"]'])
            assert json.loads(await ws.recv()) == "v"
    run(go())


def test_json_refusals_come_in_turn(url, r):
    async def go():
        async with websockets.connect(url, subprotocols=["json"]) as ws:
            for bad in ("not json", "{}", "[]", '["GET", ["k"]]'):
                await ws.send(bad)
                assert "error" in json.loads(await ws.recv())
            # Behind a waiting BLPOP, a refusal waits for the BLPOP's reply.
            await ws.send(json.dumps(["BLPOP", "q", "0"]))
            await ws.send("oops")
            await asyncio.to_thread(wait_for, lambda: "blpop" in r.execute_command("CLIENT", "LIST"),
                                    what="BLPOP waiting")
            r.rpush("q", "job")
            assert json.loads(await ws.recv()) == ["q", "job"]
            assert "error" in json.loads(await ws.recv())
    run(go())


def test_quit_closes_with_1000(url):
    async def go():
        async with websockets.connect(url, subprotocols=["json"]) as ws:
            await ws.send('["QUIT"]')
            assert json.loads(await ws.recv()) == "OK"
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1000
    run(go())


def test_client_kill_closes_the_websocket(url, r):
    async def go():
        async with websockets.connect(url, subprotocols=["json"]) as ws:
            await ws.send('["CLIENT", "ID"]')
            client_id = json.loads(await ws.recv())
            assert r.execute_command("CLIENT", "KILL", "ID", client_id) == 1
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1000
    run(go())


def test_client_close_and_ping(url):
    async def go():
        ws = await websockets.connect(url, subprotocols=["json"])
        pong = await ws.ping(b"hi")
        await asyncio.wait_for(pong, 5)
        await ws.close(1000, "bye")
        assert ws.close_code == 1000
    run(go())


def test_worker_shutdown_closes_with_1001(make_server):
    s = make_server()

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{s.http_port}/",
                                      subprotocols=["json"]) as ws:
            await ws.send('["PING"]')
            assert json.loads(await ws.recv()) == "PONG"
            await asyncio.to_thread(s.stop)
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1001
    run(go())


# -- term -----------------------------------------------------------------


class Screen:
    """The subset of VT100 the server sends, drawn into lines."""

    def __init__(self):
        self.rows, self.row, self.col = [""], 0, 0

    def feed(self, text):
        i = 0
        while i < len(text):
            m = re.match(r"\x1b\[([0-9;]*)([A-Za-z])", text[i:])
            if m:
                n = int(m.group(1) or 1) if m.group(1) != "2" or m.group(2) != "J" else 2
                final = m.group(2)
                if final == "K":
                    self.rows[self.row] = self.rows[self.row][:self.col]
                elif final == "C":
                    self.col += n
                elif final == "D":
                    self.col = max(0, self.col - n)
                elif final == "H":
                    self.row = self.col = 0
                elif final == "J":
                    self.rows, self.row, self.col = [""], 0, 0
                i += m.end()
                continue
            ch = text[i]
            i += 1
            if ch == "\r":
                self.col = 0
            elif ch == "\n":
                self.row += 1
                if self.row == len(self.rows):
                    self.rows.append("")
            elif ch == "\b":
                self.col = max(0, self.col - 1)
            elif ch >= " ":
                line = self.rows[self.row].ljust(self.col)
                self.rows[self.row] = line[:self.col] + ch + line[self.col + 1:]
                self.col += 1

    def text(self):
        return "\n".join(self.rows)


class Term:
    def __init__(self, ws):
        self.ws, self.screen = ws, Screen()

    async def read_until_prompt(self):
        """Reads until the screen's last line is a fresh prompt."""
        while True:
            self.screen.feed(await self.ws.recv())
            if self.screen.rows[self.screen.row] == "shoal> " and self.screen.col == 7:
                return

    async def run(self, keys):
        """Types `keys` (which end in Enter) and returns the lines the
        command printed, between the echoed line and the next prompt."""
        start = self.screen.row
        await self.ws.send(keys)
        await self.read_until_prompt()
        return self.screen.rows[start + 1:self.screen.row]


async def term(url):
    ws = await websockets.connect(url, subprotocols=["term"])
    t = Term(ws)
    await t.read_until_prompt()
    return t


def redis_cli_tty(port, *args):
    """redis-cli's terminal formatting (--no-raw) of one command."""
    p = subprocess.run(["redis-cli", "--no-raw", "-p", str(port), *args],
                       capture_output=True, timeout=30)
    return p.stdout.decode().rstrip("\n").split("\n")


def test_term_replies_print_like_redis_cli(url, server, r):
    r.rpush("l", *[f"item {i}" for i in range(12)])
    r.hset("h", mapping={"a": "1", "b": "two\nlines"})
    r.zadd("z", {"m1": 1, "m2": 2.5})
    r.set("s", "quote\" and \\ and é")
    commands = [
        ["PING"], ["SET", "k", "v"], ["GET", "k"], ["GET", "nokey"], ["INCRBY", "n", "0"],
        ["LRANGE", "l", "0", "-1"], ["HGETALL", "h"], ["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        ["GET", "s"], ["LRANGE", "nokey", "0", "-1"], ["GET", "l"], ["SMEMBERS", "nokey"],
        ["NOSUCH", "x"],
    ]

    async def go():
        t = await term(url)
        for args in commands:
            line = " ".join(f'"{a}"' if " " in a else a for a in args)
            printed = await t.run(line + "\r")
            assert printed == redis_cli_tty(server.port, *args), args
        await t.ws.close()
    run(go())


def test_term_resp3_replies_print_like_redis_cli(url, server, r):
    r.hset("h", mapping={"a": "1"})
    r.zadd("z", {"m": 1.5})

    async def go():
        t = await term(url)
        await t.run("hello 3\r")
        assert await t.run("hgetall h\r") == redis_cli_tty(server.port, "-3", "HGETALL", "h")
        assert await t.run("zscore z m\r") == redis_cli_tty(server.port, "-3", "ZSCORE", "z", "m")
        await t.ws.close()
    run(go())


def test_term_edits_the_line(url, r):
    async def go():
        t = await term(url)
        # Typing is echoed, one key at a time.
        for ch in "set k hello":
            await t.ws.send(ch)
            t.screen.feed(await t.ws.recv())
        assert t.screen.rows[t.screen.row] == "shoal> set k hello"
        assert await t.run("\r") == ["OK"]
        # Backspace, and inserting after moving left.
        assert await t.run("ge kx\x7f\x1b[D\x1b[Dt\r") == ['"hello"']
        # Left, Home, End and Delete.
        assert await t.run("et k\x1b[Hg\x1b[F\x1b[D\x1b[3~k\r") == ['"hello"']
        # Up walks the history; Down comes back to the line being typed.
        assert await t.run("\x1b[A\x1b[A\r") == ["OK"]
        assert r.get("k") == "hello"
        await t.ws.send("draft\x1b[A\x1b[B")
        await asyncio.sleep(0.2)
        while True:
            try:
                t.screen.feed(await asyncio.wait_for(t.ws.recv(), 0.3))
            except asyncio.TimeoutError:
                break
        assert t.screen.rows[t.screen.row] == "shoal> draft"
        # Ctrl-C drops the line.
        await t.ws.send("\x03")
        await t.read_until_prompt()
        assert t.screen.rows[t.screen.row - 1] == "shoal> draft^C"
        # Bad quoting is refused locally, as redis-cli does.
        assert await t.run('get "k\r') == ["Invalid argument(s)"]
        # A blank line gives a new prompt.
        assert await t.run("\r") == []
        await t.ws.close()
    run(go())


def test_term_blocking_command_prints_when_served(url, r):
    async def go():
        t = await term(url)
        await t.ws.send("blpop q 0\r")
        await asyncio.to_thread(wait_for, lambda: "blpop" in r.execute_command("CLIENT", "LIST"),
                                what="BLPOP waiting")
        r.rpush("q", "job")
        await t.read_until_prompt()
        assert t.screen.rows[-3:-1] == ['1) "q"', '2) "job"']
        await t.ws.close()
    run(go())


# -- the handshake and bad frames -------------------------------------------


def test_unknown_subprotocol_is_refused(url):
    async def go():
        with pytest.raises(InvalidStatus) as e:
            await websockets.connect(url, subprotocols=["chat"])
        assert e.value.response.status_code == 400
    run(go())


def test_another_origin_is_refused(url):
    async def go():
        with pytest.raises(InvalidStatus) as e:
            await websockets.connect(url, origin="http://evil.example")
        assert e.value.response.status_code == 403
        async with websockets.connect(url, origin=url.replace("ws:", "http:").rstrip("/")) as ws:
            await ws.send(b"PING\r\n")
            assert await ws.recv() == b"+PONG\r\n"
    run(go())


class RawWs:
    """A hand-made WebSocket client: the handshake, then raw frames."""

    def __init__(self, port, extra=b"", version=b"13"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16))
        self.sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                          b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key +
                          b"\r\nSec-WebSocket-Version: " + version + b"\r\n" + extra + b"\r\n")
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(4096)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split()[1])
        self.head = head

    def frame(self, opcode, payload, fin=True, mask=True, rsv=0):
        b0 = (0x80 if fin else 0) | rsv | opcode
        n = len(payload)
        m = 0x80 if mask else 0
        if n < 126:
            header = struct.pack("!BB", b0, m | n)
        elif n < 65536:
            header = struct.pack("!BBH", b0, m | 126, n)
        else:
            header = struct.pack("!BBQ", b0, m | 127, n)
        if mask:
            key = os.urandom(4)
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            header += key
        self.sock.sendall(header + payload)

    def read_frame(self):
        while len(self.buf) < 2:
            self.buf += self.sock.recv(4096)
        b0, b1 = self.buf[0], self.buf[1]
        n, at = b1 & 0x7F, 2
        if n == 126:
            n, at = struct.unpack("!H", self.buf[2:4])[0], 4
        while len(self.buf) < at + n:
            self.buf += self.sock.recv(4096)
        payload, self.buf = self.buf[at:at + n], self.buf[at + n:]
        return b0 & 0x0F, payload

    def close_code(self):
        """Reads frames until the server's close; returns its status code."""
        while True:
            opcode, payload = self.read_frame()
            if opcode == 8:
                return struct.unpack("!H", payload[:2])[0]


@pytest.mark.parametrize("send, code", [
    (lambda w: w.frame(1, b"PING\r\n", mask=False), 1002),
    (lambda w: w.frame(1, b"x", rsv=0x40), 1002),
    (lambda w: w.frame(9, b"x" * 126), 1002),
    (lambda w: w.frame(0, b"x"), 1002),
    (lambda w: w.frame(1, b"\xff\xfe"), 1007),
    (lambda w: w.sock.sendall(b"\x82\xff" + struct.pack("!Q", 1 << 40) + b"mask"), 1009),
    (lambda w: w.frame(8, b"\x03\xed"), 1002),
])
def test_bad_frames_close_with_the_rfc_code(server, r, send, code):
    w = RawWs(server.http_port)
    assert w.status == 101
    send(w)
    assert w.close_code() == code
    w.sock.close()


def test_raw_frames_fragments_and_control_frames_between(server, r):
    w = RawWs(server.http_port, extra=b"Sec-WebSocket-Protocol: json\r\n")
    assert w.status == 101 and b"Sec-WebSocket-Protocol: json" in w.head
    w.frame(1, b'["ECH', fin=False)
    w.frame(9, b"ping!")
    w.frame(0, b'O", "a b"]')
    assert w.read_frame() == (10, b"ping!")
    assert w.read_frame() == (1, b'"a b"')
    w.frame(8, struct.pack("!H", 1000) + b"done")
    assert w.read_frame() == (8, struct.pack("!H", 1000))
    w.sock.close()


def test_handshake_refusals(server, r):
    w = RawWs(server.http_port, version=b"12")
    assert w.status == 426 and b"Sec-WebSocket-Version: 13" in w.head
    w.sock.close()
    s = socket.create_connection(("127.0.0.1", server.http_port), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 400 ")
    s.close()


def test_many_websockets_at_once(url, r):
    async def one(i):
        async with websockets.connect(url, subprotocols=["json"]) as ws:
            for j in range(20):
                await ws.send(json.dumps(["INCR", "shared"]))
                await ws.recv()
            await ws.send(json.dumps(["SET", f"k{i}", str(i)]))
            assert json.loads(await ws.recv()) == "OK"

    async def go():
        await asyncio.gather(*(one(i) for i in range(20)))
    run(go())
    assert r.get("shared") == "400"
    assert r.mget([f"k{i}" for i in range(20)]) == [str(i) for i in range(20)]

