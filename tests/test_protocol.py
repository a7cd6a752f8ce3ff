"""The wire protocol end to end: redis-py pipelines of 10k commands, inline
commands, bursts written in one send, frames split into pieces, malformed
frames (answered and closed exactly as redis-server 7.0 does, compared byte
for byte against a real redis-server), random bytes from a seeded RNG, and
clients that vanish in the middle of a large reply."""

import random
import socket
import struct
import time

import pytest

from shoaltest import Err, encode


def exchange(port, data, expect=None, timeout=2.0):
    """Writes `data` on a fresh connection; returns (every byte the server
    sent back, whether it closed the connection). Once `expect` bytes have
    come, waits only briefly for more (or for the close)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(data)
        s.settimeout(timeout)
        out, closed = b"", False
        try:
            while True:
                if expect is not None and len(out) >= expect:
                    s.settimeout(0.2)
                chunk = s.recv(65536)
                if not chunk:
                    closed = True
                    break
                out += chunk
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed = True
        return out, closed
    finally:
        s.close()


PING = b"*1\r\n$4\r\nPING\r\n"

# (frame, exact reply, connection closed afterwards)
MALFORMED = [
    (b"*1\r\nfoo\r\n", b"-ERR Protocol error: expected '$', got 'f'\r\n", True),
    (b"*1\r\n:5\r\n", b"-ERR Protocol error: expected '$', got ':'\r\n", True),
    (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n", True),
    (b"*1x\r\n", b"-ERR Protocol error: invalid multibulk length\r\n", True),
    (b"*2147483648\r\n", b"-ERR Protocol error: invalid multibulk length\r\n", True),
    (b"*1\r\n$2147483648\r\n", b"-ERR Protocol error: invalid bulk length\r\n", True),
    (b"*1\r\n$536870913\r\n", b"-ERR Protocol error: invalid bulk length\r\n", True),
    (b"*1\r\n$-1\r\n", b"-ERR Protocol error: invalid bulk length\r\n", True),
    (b"*1\r\n$ 3\r\n", b"-ERR Protocol error: invalid bulk length\r\n", True),
    (b"*1\r\n$3x\r\nfoo\r\n", b"-ERR Protocol error: invalid bulk length\r\n", True),
    (PING + b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$x\r\n",
     b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n", True),
    (b'set "foo\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n", True),
    (b"x" * 70000, b"-ERR Protocol error: too big inline request\r\n", True),
    # not errors: empty and null multibulks are skipped, blank lines ignored
    (b"*-1\r\n" + PING, b"+PONG\r\n", False),
    (b"*0\r\n" + PING, b"+PONG\r\n", False),
    (b"\r\n\r\nPING\r\n", b"+PONG\r\n", False),
    (b"PING\r\nPING\n", b"+PONG\r\n+PONG\r\n", False),
    # the two bytes after a bulk are skipped, not checked
    (b"*1\r\n$3\r\nfooXX" + PING,
     b"-ERR unknown command 'foo', with args beginning with: \r\n+PONG\r\n", False),
    (b"$3\r\nfoo\r\n", b"-ERR unknown command '$3', with args beginning with: \r\n"
     b"-ERR unknown command 'foo', with args beginning with: \r\n", False),
    # incomplete frames wait for more
    (b"*1\r\n$4\r\nPI", b"", False),
    (b"*1\r\n$536870912\r\n", b"", False),
    (b"*100000000\r\n", b"", False),
]


@pytest.mark.parametrize("frame,reply,closed", MALFORMED, ids=[repr(m[0][:24]) for m in MALFORMED])
def test_malformed_frames(server, frame, reply, closed):
    assert exchange(server.port, frame, expect=len(reply)) == (reply, closed)
    with server.raw() as c:  # and the server goes on serving
        assert c.cmd("PING") == "PONG"


@pytest.mark.parametrize("frame,reply,closed", MALFORMED, ids=[repr(m[0][:24]) for m in MALFORMED])
def test_malformed_frames_same_as_redis(server, redis_ref, frame, reply, closed):
    reference = exchange(redis_ref.port, frame, expect=len(reply))
    assert exchange(server.port, frame, expect=len(reference[0])) == reference


def test_huge_bulk_length(raw):
    raw.send(b"*2\r\n$3\r\nGET\r\n$2147483648\r\n")
    assert raw.read_all() == (b"-ERR Protocol error: invalid bulk length\r\n", True)


def test_inline_commands(raw):
    raw.send(b'SET k "hello world"\r\n')
    assert raw.reply() == "OK"
    raw.send(b"GET k\r\n")
    assert raw.reply() == b"hello world"
    raw.send(b"SET q \"a\\x41\\n\" \r\n")
    assert raw.reply() == "OK"
    assert raw.cmd("GET", "q") == b"aA\n"
    raw.send(b"SET s 'it''s'\r\n")  # adjacent quoted parts are an error in Redis
    assert raw.reply() == Err("ERR Protocol error: unbalanced quotes in request")


def test_inline_mixed_with_multibulk(raw):
    raw.send(b"SET a 1\r\n" + encode("GET", "a") + b"PING\r\n" + encode("EXISTS", "a"))
    assert [raw.reply() for _ in range(4)] == ["OK", b"1", "PONG", 1]


def test_burst_in_one_send(raw):
    n = 5000
    data = b"".join(encode("SET", f"k{i}", f"v{i}") for i in range(n))
    data += b"".join(encode("GET", f"k{i}") for i in range(n))
    raw.send(data)
    replies = [raw.reply() for _ in range(2 * n)]
    assert replies[:n] == ["OK"] * n
    assert replies[n:] == [f"v{i}".encode() for i in range(n)]


@pytest.mark.parametrize("piece", [1, 2, 3, 7])
def test_frames_sent_in_pieces(raw, piece):
    data = encode("SET", "split", "x" * 100) + encode("GET", "split") + b"PING\r\n"
    for i in range(0, len(data), piece):
        raw.send(data[i:i + piece])
        if i % (piece * 16) == 0:
            time.sleep(0.001)
    assert [raw.reply() for _ in range(3)] == ["OK", b"x" * 100, "PONG"]


def test_half_frame_then_rest_later(raw):
    frame = encode("SET", "k", "v" * 10000)
    raw.send(frame[: len(frame) // 2])
    time.sleep(0.2)
    raw.send(frame[len(frame) // 2:])
    assert raw.reply() == "OK"
    assert raw.cmd("GET", "k") == b"v" * 10000


def test_redis_py_pipeline_10k(r):
    n = 10_000
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set(f"key:{i}", i)
    assert p.execute() == [True] * n
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.get(f"key:{i}")
    assert p.execute() == [str(i) for i in range(n)]
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set(f"key:{i}", f"new:{i}", get=True)
    assert p.execute() == [str(i) for i in range(n)]
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.delete(f"key:{i}")
        p.exists(f"key:{i}")
    assert p.execute() == [1, 0] * n


def test_pipeline_with_errors_keeps_order(r):
    p = r.pipeline(transaction=False)
    p.set("a", "x")
    p.execute_command("SET", "a", "y", "EX", "0")
    p.execute_command("NOSUCHCOMMAND")
    p.get("a")
    out = p.execute(raise_on_error=False)
    assert out[0] is True
    assert str(out[1]) == "invalid expire time in 'set' command"
    assert str(out[2]) == "unknown command 'NOSUCHCOMMAND', with args beginning with: "
    assert out[3] == "x"


def test_random_bytes_never_crash_the_server(server):
    rng = random.Random(20240611)
    alphabet = b"*$:+-\r\n0123456789-PINGSETabc \"'\\"
    for round_ in range(300):
        kind = rng.randrange(4)
        if kind == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        elif kind == 1:
            data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 300)))
        else:
            # a valid pipeline with a few bytes flipped or cut
            data = bytearray(b"".join(encode("SET", f"k{rng.randrange(10)}", "v" * rng.randrange(20))
                                      for _ in range(5)))
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            if kind == 3:
                data = data[: rng.randrange(len(data))]
            data = bytes(data)
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        try:
            s.sendall(data)
            s.settimeout(0.02)
            try:
                while s.recv(65536):
                    pass
            except (socket.timeout, ConnectionResetError):
                pass
        finally:
            s.close()
        if round_ % 50 == 0:
            with server.raw() as c:
                assert c.cmd("PING") == "PONG"
    assert server.proc.poll() is None
    if server.kind == "shoal":
        assert server.worker_pids()
    with server.raw() as c:
        assert c.cmd("PING") == "PONG"


def test_client_vanishing_mid_reply(server, raw):
    big = b"v" * (4 << 20)
    raw.cmd("SET", "big", big)
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(encode("GET", "big") * 8)
        time.sleep(0.05)
        # close with unread data pending; SO_LINGER 0 makes it a reset
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        assert raw.cmd("PING") == "PONG"
    with server.raw() as c:
        assert c.cmd("GET", "big") == big
    assert server.proc.poll() is None
