"""Client buffers count toward maxmemory (as in Redis): INFO reports them
(`mem_clients_normal`, in `used_memory`), under an evicting policy they push
keys out, and `maxmemory-clients` (bytes or a percentage of maxmemory)
evicts the clients with the most memory instead, never a CLIENT NO-EVICT
one (`evicted_clients`)."""

import socket

from shoaltest import wait_for


def stuck_request(port, size):
    """A connection holding `size` bytes of a SET whose value never
    finishes arriving: its query buffer stays on the server."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (size * 2) + b"x" * size)
    return s


def closed_by_server(conns):
    """How many of `conns` the server has closed (looked at without
    waiting)."""
    gone = 0
    for c in conns:
        c.setblocking(False)
        try:
            gone += c.recv(1) == b""
        except BlockingIOError:
            pass
        except ConnectionResetError:
            gone += 1
    return gone


def fill(r, keys, size=100_000):
    for i in range(keys):
        r.setrange(str(i), size, "x")
    assert r.dbsize() == keys


def test_client_memory_in_info(make_server):
    s = make_server(workers=2)
    r = s.client()
    assert int(r.info("memory")["mem_clients_normal"]) == 0
    conns = [stuck_request(s.port, 200_000) for _ in range(2)]
    info = wait_for(lambda: (lambda i: i if i["mem_clients_normal"] >= 350_000 else None)(
        r.info("memory")), what="client buffers in INFO")
    assert info["used_memory"] >= info["used_memory_dataset"] + 350_000
    assert info["mem_clients_slaves"] == 0
    for c in conns:
        c.close()
    wait_for(lambda: r.info("memory")["mem_clients_normal"] == 0, what="buffers released")
    r.close()


def test_keys_evicted_for_client_buffers(make_server):
    s = make_server(workers=2)
    r = s.client()
    r.config_set("maxmemory", "4mb")
    r.config_set("maxmemory-policy", "allkeys-lru")
    fill(r, 20)
    r.config_resetstat()
    conns = [stuck_request(s.port, 250_000) for _ in range(12)]
    # Each command evicts first while over the limit (INFO too, as Redis's
    # performEvictions).
    wait_for(lambda: r.info("stats")["evicted_keys"] > 0, what="keys evicted")
    assert r.dbsize() < 20
    assert r.info("stats")["evicted_clients"] == 0
    for c in conns:
        c.close()
    r.close()


def test_client_eviction_spares_no_evict_clients(make_server):
    s = make_server(workers=2)
    r = s.client()
    r.config_set("maxmemory", "11mb")
    r.config_set("maxmemory-policy", "allkeys-lru")
    r.config_set("maxmemory-clients", "1mb")
    r.client_no_evict("on")
    fill(r, 20)
    r.config_resetstat()
    conns = [stuck_request(s.port, 250_000) for _ in range(10)]
    wait_for(lambda: r.info("stats")["evicted_clients"] > 0, what="clients evicted")
    # The evicted connections were closed by the server.
    wait_for(lambda: closed_by_server(conns) >= 1, what="evicted connections closed")
    # Nothing left over the limit, no key evicted, our client still here.
    wait_for(lambda: r.info("memory")["mem_clients_normal"] < 1024 * 1024,
             what="client memory under maxmemory-clients")
    assert r.info("stats")["evicted_keys"] == 0
    assert r.dbsize() == 20
    assert r.ping()
    # CONFIG RESETSTAT starts the count again on every worker.
    r.config_resetstat()
    assert r.info("stats")["evicted_clients"] == 0
    for c in conns:
        c.close()
    r.close()


def test_maxmemory_clients_percentage(make_server):
    s = make_server(workers=1)
    r = s.client()
    r.config_set("maxmemory-clients", "10%")
    assert r.config_get("maxmemory-clients") == {"maxmemory-clients": "10%"}
    r.client_no_evict("on")
    # Without maxmemory a percentage is no limit.
    conns = [stuck_request(s.port, 250_000) for _ in range(6)]
    wait_for(lambda: r.info("memory")["mem_clients_normal"] >= 1_300_000,
             what="client buffers published")
    assert r.info("stats")["evicted_clients"] == 0
    for c in conns:
        c.close()
    wait_for(lambda: r.info("memory")["mem_clients_normal"] == 0, what="buffers released")
    # 10% of 10 MB: about 1 MB of client buffers.
    r.config_set("maxmemory", "10mb")
    conns = [stuck_request(s.port, 250_000) for _ in range(6)]
    wait_for(lambda: r.info("stats")["evicted_clients"] > 0, what="clients evicted")
    wait_for(lambda: closed_by_server(conns) >= 1, what="evicted connections closed")
    for c in conns:
        c.close()
    r.close()
