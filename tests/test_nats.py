"""NATS clients of shoal: the raw protocol beside the real nats-server (the
same lines to both, the same replies), nats-py against shoal, and the one
subject space NATS shares with Redis pub/sub."""

import asyncio
import json
import shutil
import socket
import subprocess
import time

import pytest

from shoaltest import Server, free_port, wait_for

nats = pytest.importorskip("nats")

pytestmark = pytest.mark.shoal_only


@pytest.fixture(scope="module")
def shoal():
    s = Server(workers=2).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def nats_server():
    if shutil.which("nats-server") is None:
        pytest.skip("nats-server is not installed (scripts/test installs it)")
    port = free_port()
    proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    wait_for(up, timeout=10)
    yield port
    proc.terminate()
    proc.wait()


def talk(port, data, settle=0.3):
    """Sends `data` on a fresh connection; returns what came back, with the
    INFO line's JSON left out, and `<EOF>` when the server closed."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(settle)
    s.sendall(data)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                got += b"<EOF>"
                break
            got += b
    except socket.timeout:
        pass
    s.close()
    lines = got.split(b"\r\n")
    return b"\r\n".join(b"INFO" if line.startswith(b"INFO ") else line for line in lines)


RAW_CASES = [
    b'CONNECT {"verbose":true}\r\nPING\r\nSUB a.* 1\r\nPUB a.b 2\r\nhi\r\nUNSUB 1\r\nPING\r\n',
    b"ping\r\nPING\n",
    b"FOO\r\n",
    b"PUB\r\n",
    b"UNSUB\r\nPING\r\n",
    b"PUB a\r\n",
    b"PUB a x\r\n",
    b"PUB a -1\r\n",
    b"SUB a\r\nPING\r\n",
    b"SUB a 1 2 3\r\nPING\r\n",
    b"SUB a..b 1\r\nPING\r\n",
    b"SUB a* 1\r\nSUB a.>.b 2\r\nSUB a.b> 3\r\nPING\r\n",
    b"UNSUB x\r\nPING\r\n",
    b"PUB a 2\r\nhello\r\nPING\r\n",
    b"PUB a 1\r\nx\rPING\r\n",
    b"PUB a.* 2\r\nhi\r\nPING\r\n",
    b'CONNECT {"pedantic":true}\r\nPUB a.* 2\r\nhi\r\nPING\r\n',
    b"CONNECT {bad\r\nPING\r\n",
    b"PUB a 2000000\r\n",
    b"SUB " + b"a" * 5000 + b" 1\r\n",
    b"SUB a 1\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n",
    b"SUB a q 1\r\nPUB a 1\r\nx\r\nUNSUB 1\r\nPUB a 1\r\ny\r\nPING\r\n",
    b"SUB  a   1\r\nPUB\ta\t1\r\nx\r\nPING\r\n",
    b"SUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\nx\r\nPUB a 1\r\ny\r\nPUB a 1\r\nz\r\nPING\r\n",
    b"SUB a 1\r\nUNSUB 1 0\r\nPUB a 1\r\nx\r\nPING\r\n",
    b"SUB a 1\r\nSUB > 2\r\nPUB a 1\r\nx\r\nPING\r\n",
    # nats-server gives no order among one message's subscriptions: each
    # message here matches one.
    b'CONNECT {"verbose":false}\r\nSUB a.* 1\r\nSUB b.> 2\r\nSUB *.c 3\r\n'
    b"PUB a.b 1\r\nx\r\nPUB b.x.y 1\r\ny\r\nPUB x.c 1\r\nz\r\nPUB a.b.c 1\r\nw\r\n"
    b"PUB b 1\r\nv\r\nPING\r\n",
    b'CONNECT {"headers":true,"no_responders":true}\r\nSUB r 1\r\nPUB a r 1\r\nx\r\nPING\r\n',
    b'CONNECT {"no_responders":true}\r\nPING\r\n',
    b"HPUB a 0 1\r\nx\r\n",
    b'CONNECT {"headers":true}\r\nHPUB a 2 1\r\n',
    b'CONNECT {"headers":true}\r\nSUB a 1\r\nHPUB a 2 3\r\nab\r\n',
    b"INFO {}\r\nPONG\r\nPING\r\n",
    b'CONNECT {"echo":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n',
    b'CONNECT {"echo":false,"verbose":false}\r\nSUB a.> 1\r\nSUB a.b 2\r\nPUB a.b 1\r\nx\r\nPING\r\n',
]


@pytest.mark.parametrize("case", RAW_CASES, ids=lambda c: c[:40].decode("latin1"))
def test_raw_lines_as_nats_server(shoal, nats_server, case):
    assert talk(shoal.nats_port, case) == talk(nats_server, case)


def test_info_announces_the_settings(shoal):
    s = socket.create_connection(("127.0.0.1", shoal.nats_port))
    s.settimeout(5)
    line = b""
    while not line.endswith(b"\r\n"):
        line += s.recv(4096)
    s.close()
    assert line.startswith(b"INFO ")
    info = json.loads(line[5:])
    assert info["proto"] == 1
    assert info["headers"] is True
    assert info["max_payload"] == 1 << 20
    assert info["port"] == shoal.nats_port
    assert isinstance(info["client_id"], int) and info["client_id"] > 0
    assert info["server_id"]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def connect(server, **kw):
    return await nats.connect(f"nats://127.0.0.1:{server.nats_port}",
                              allow_reconnect=False, **kw)


async def drain_queue(sub, n):
    return [await sub.next_msg(timeout=5) for _ in range(n)]


def test_publish_subscribe_and_wildcards(shoal):
    async def main():
        nc = await connect(shoal)
        exact = await nc.subscribe("md.a")
        one = await nc.subscribe("md.*")
        rest = await nc.subscribe("md.>")
        await nc.flush()
        for subject, data in [("md.a", b"1"), ("md.b.c", b"2"), ("x.y", b"3"), ("md.b", b"4")]:
            await nc.publish(subject, data)
        await nc.flush()
        assert [(m.subject, m.data) for m in await drain_queue(exact, 1)] == [("md.a", b"1")]
        assert [(m.subject, m.data) for m in await drain_queue(one, 2)] == [
            ("md.a", b"1"), ("md.b", b"4")]
        assert [(m.subject, m.data) for m in await drain_queue(rest, 3)] == [
            ("md.a", b"1"), ("md.b.c", b"2"), ("md.b", b"4")]
        for sub in (exact, one, rest):
            with pytest.raises(nats.errors.TimeoutError):
                await sub.next_msg(timeout=0.3)
        await nc.close()

    run(main())


def test_unsubscribe_with_max(shoal):
    async def main():
        nc = await connect(shoal)
        sub = await nc.subscribe("um.x")
        await sub.unsubscribe(limit=2)
        await nc.flush()
        for i in range(4):
            await nc.publish("um.x", str(i).encode())
        await nc.flush()
        got = await drain_queue(sub, 2)
        assert [m.data for m in got] == [b"0", b"1"]
        await nc.close()

    run(main())


def test_queue_members_on_one_connection_share_messages(shoal):
    # nats-server picks a member at random, so this is not differential:
    # each message reaches exactly one of the two members.
    s = socket.create_connection(("127.0.0.1", shoal.nats_port))
    s.settimeout(5)
    s.sendall(b'CONNECT {"verbose":false}\r\nSUB qq.x g 1\r\nSUB qq.x g 2\r\nSUB qq.x 3\r\n'
              + b"PUB qq.x 1\r\nm\r\n" * 10 + b"PING\r\n")
    got = b""
    while not got.endswith(b"PONG\r\n"):
        got += s.recv(65536)
    s.close()
    sids = [line.split()[2] for line in got.split(b"\r\n") if line.startswith(b"MSG ")]
    assert sids.count(b"3") == 10
    assert sids.count(b"1") + sids.count(b"2") == 10
    assert sids.count(b"1") > 0 and sids.count(b"2") > 0


def test_no_responders(shoal):
    async def main():
        nc = await connect(shoal)
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("nobody.home", b"?", timeout=5)
        await nc.close()

    run(main())


def test_redis_publish_reaches_nats_subscribers(shoal):
    async def main():
        nc = await connect(shoal)
        exact = await nc.subscribe("rx.a")
        wild = await nc.subscribe("rx.*")
        await nc.flush()
        r = shoal.client()
        wait_for(lambda: r.pubsub_numpat() >= 1 and r.pubsub_numsub("rx.a")[0][1] >= 1)
        # "rx.a.b" matches the Redis glob rx.* but not the NATS subject rx.*.
        assert r.publish("rx.a", "one") == 2
        assert r.publish("rx.a.b", "two") == 1
        assert r.publish("rx.b", "three") == 1
        assert [m.data for m in await drain_queue(exact, 1)] == [b"one"]
        assert [(m.subject, m.data) for m in await drain_queue(wild, 2)] == [
            ("rx.a", b"one"), ("rx.b", b"three")]
        r.close()
        await nc.close()

    run(main())


def test_nats_publish_reaches_redis_subscribers(shoal):
    r = shoal.client()
    p = r.pubsub()
    p.subscribe("nx.a")
    p.psubscribe("nx.*")
    for _ in range(2):
        assert p.get_message(timeout=5)["type"] in ("subscribe", "psubscribe")

    async def main():
        nc = await connect(shoal)
        await nc.publish("nx.a", b"hello")
        # Headers reach no Redis subscriber: it gets the payload.
        await nc.publish("nx.a", b"with-headers", headers={"K": "V"})
        await nc.flush()
        await nc.close()

    run(main())
    got = []
    deadline = time.time() + 5
    while len(got) < 4 and time.time() < deadline:
        m = p.get_message(timeout=1)
        if m:
            got.append((m["type"], m["channel"], m["data"]))
    assert sorted(got) == sorted([
        ("message", "nx.a", "hello"), ("pmessage", "nx.a", "hello"),
        ("message", "nx.a", "with-headers"), ("pmessage", "nx.a", "with-headers")])
    p.close()
    r.close()


def test_order_and_exactly_once_across_workers(shoal):
    """Subscribers on both workers each get every message of each
    publisher once, in publish order."""
    async def main():
        subs = []
        conns = []
        for _ in range(6):
            nc = await connect(shoal)
            conns.append(nc)
            subs.append(await nc.subscribe("ord.>"))
            await nc.flush()
        pubs = [await connect(shoal) for _ in range(3)]
        n = 50
        for i in range(n):
            for k, pc in enumerate(pubs):
                await pc.publish(f"ord.p{k}", str(i).encode())
        for pc in pubs:
            await pc.flush()
        for sub in subs:
            got = await drain_queue(sub, n * len(pubs))
            for k in range(len(pubs)):
                seq = [int(m.data) for m in got if m.subject == f"ord.p{k}"]
                assert seq == list(range(n))
            with pytest.raises(nats.errors.TimeoutError):
                await sub.next_msg(timeout=0.2)
        for nc in conns + pubs:
            await nc.close()

    run(main())


def test_retained_value_comes_first(shoal):
    r = shoal.client()
    r.config_set("lvc-channels", "lv.*")
    try:
        r.publish("lv.x", "old")
        r.publish("lv.x", "last")

        async def main():
            nc = await connect(shoal)
            sub = await nc.subscribe("lv.x")
            await nc.flush()
            first = await sub.next_msg(timeout=5)
            assert first.data == b"last"
            assert first.headers == {"Shoal-Seq": "2"}
            r.publish("lv.x", "next")
            later = await sub.next_msg(timeout=5)
            assert (later.data, later.headers) == (b"next", {"Shoal-Seq": "3"})
            await nc.close()

        run(main())
    finally:
        r.config_set("lvc-channels", "")
        r.close()


def test_client_list_counts_nats_clients(shoal):
    async def main():
        nc = await connect(shoal, name="probe-client")
        await nc.flush()
        r = shoal.client()
        clients = r.client_list()
        mine = [c for c in clients if c["name"] == "probe-client"]
        assert len(mine) == 1
        assert mine[0]["lib-name"] == "python3"
        assert mine[0]["laddr"].endswith(f":{shoal.nats_port}")
        r.close()
        await nc.close()

    run(main())


def test_slow_consumer_is_cut_without_slowing_the_publisher(shoal):
    r = shoal.client()
    r.config_set("client-output-buffer-limit", "pubsub 1mb 0 0")
    try:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", shoal.nats_port))
        s.sendall(b'CONNECT {"verbose":false,"name":"sleeper"}\r\nSUB slow.x 1\r\nPING\r\n')
        got = b""
        while b"PONG\r\n" not in got:
            got += s.recv(4096)
        # The subscriber reads nothing more; every publish still returns.
        chunk = "x" * 100_000
        for _ in range(100):
            r.publish("slow.x", chunk)
        wait_for(lambda: not [c for c in r.client_list() if c["name"] == "sleeper"])
        assert r.publish("slow.x", "after") == 0
        s.close()
    finally:
        r.config_set("client-output-buffer-limit", "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60")
        r.close()
