"""CONFIG SET port and bind, as redis-server does them, on a server of two
worker processes: the worker that runs the command binds the new socket
(a port or address that cannot be bound refuses the whole CONFIG SET and
changes nothing, Redis's rollback), and the supervisor moves every other
worker and keeps the new sockets for a worker it restarts."""

import os
import signal
import socket

import pytest

from shoaltest import (Err, encode, free_port, info_section, port_refused, raw_on_worker,
                       paused, wait_for, worker_slot_pids)


@pytest.fixture
def two(make_server):
    return make_server(workers=2)


def test_port_moves_every_worker(two):
    c = two.raw()
    old, new = two.port, free_port()
    assert c.cmd("CONFIG", "SET", "port", str(new)) == "OK"
    c.close()
    two.port = new
    for slot in (0, 1):
        w = raw_on_worker(two, slot)
        assert w.cmd("PING") == "PONG"
        assert w.cmd("CONFIG", "GET", "port") == [b"port", str(new).encode()]
        assert info_section(w, "server")["tcp_port"] == str(new)
        w.close()
    wait_for(lambda: port_refused(old), what="the old port closed")


def test_port_in_use_refuses_and_changes_nothing(two):
    c = two.raw()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    used = busy.getsockname()[1]
    before = {k: c.cmd("CONFIG", "GET", k)[1]
              for k in ("maxmemory", "port", "client-query-buffer-limit")}
    reply = c.cmd("CONFIG", "SET", "maxmemory", "10000001", "port", str(used),
                  "client-query-buffer-limit", "10m")
    assert reply == Err("ERR CONFIG SET failed (possibly related to argument 'port') - "
                        "Unable to listen on this port. Check server logs.")
    for k, v in before.items():
        assert c.cmd("CONFIG", "GET", k)[1] == v
    busy.close()
    for slot in (0, 1):
        w = raw_on_worker(two, slot)
        assert w.cmd("PING") == "PONG"
        w.close()
    c.close()


def test_bind_to_a_bad_address_refuses(two):
    c = two.raw()
    assert c.cmd("CONFIG", "SET", "bind", "999.999.999.999") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'bind') - "
        "Failed to bind to specified addresses.")
    assert c.cmd("CONFIG", "SET", "bind", " ".join(["127.0.0.1"] * 17)) == Err(
        "ERR CONFIG SET failed (possibly related to argument 'bind') - "
        "Too many bind addresses specified.")
    assert c.cmd("CONFIG", "GET", "bind") == [b"bind", b"127.0.0.1"]
    c.close()
    assert two.raw().cmd("PING") == "PONG"


def test_bind_moves_every_worker(two):
    c = two.raw()
    # Every address of the machine: the server answers on another loopback
    # address too.
    assert c.cmd("CONFIG", "SET", "bind", "* -::*") == "OK"
    assert c.cmd("CONFIG", "GET", "bind") == [b"bind", b"0.0.0.0"]
    c.close()
    s = socket.create_connection(("127.0.0.2", two.port), timeout=5)
    s.sendall(b"PING\r\n")
    assert s.recv(16) == b"+PONG\r\n"
    s.close()
    for slot in (0, 1):
        w = raw_on_worker(two, slot)
        assert w.cmd("CONFIG", "GET", "bind") == [b"bind", b"0.0.0.0"]
        w.close()


def test_port_zero_closes_the_listener(two):
    c = two.raw()
    assert c.cmd("CONFIG", "SET", "port", "0") == "OK"
    # The connection that asked stays.
    assert c.cmd("PING") == "PONG"
    # Every worker closed its socket before the reply, as in one process.
    assert port_refused(two.port)
    c.close()


def test_config_set_port_replies_once_every_worker_moved(two):
    """Redis, one process, has moved its listener when CONFIG SET port
    replies; so has every worker here: the reply waits for the other
    worker (stopped here) to serve the new socket and close the old."""
    c = raw_on_worker(two, 0)
    old, new = two.port, free_port()
    with paused(worker_slot_pids(two)[1]):
        c.send(encode("CONFIG", "SET", "port", str(new)))
        assert c.silent_for(0.5)
    assert c.reply() == "OK"
    two.port = new
    assert port_refused(old)
    w = raw_on_worker(two, 1)
    assert w.cmd("PING") == "PONG"
    w.close()
    c.close()


def test_restarted_worker_serves_the_new_port(two):
    c = two.raw()
    new = free_port()
    assert c.cmd("CONFIG", "SET", "port", str(new)) == "OK"
    c.close()
    two.port = new
    pid = worker_slot_pids(two)[1]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: worker_slot_pids(two).get(1) not in (None, pid), what="worker 1 restarted")
    w = raw_on_worker(two, 1)
    assert w.cmd("CONFIG", "GET", "port") == [b"port", str(new).encode()]
    w.close()


def test_one_port_for_two_protocols_is_refused_at_start(tmp_path):
    """Both listeners could bind it (SO_REUSEPORT) and the kernel would split
    connections between RESP and memcached; shoal refuses to start instead."""
    import subprocess

    from shoaltest import SHOAL_BIN
    port = free_port()
    name = f"clash-{port}"
    try:
        proc = subprocess.run(
            [SHOAL_BIN, "serve", "--workers", "1", "--name", name,
             "--port", str(port), "--memcached-port", str(port)],
            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    finally:
        left = [e for e in os.listdir("/dev/shm") if e == name or e.startswith(name + ".")]
        for entry in left:
            os.remove(os.path.join("/dev/shm", entry))
    # The segment this refused start made is gone with it.
    assert left == []
    assert proc.returncode != 0
    assert f"port {port} is given to both redis and memcached" in proc.stderr + proc.stdout
    assert port_refused(port)


def test_config_set_port_onto_another_protocols_port_is_refused(two):
    c = two.raw()
    reply = c.cmd("CONFIG", "SET", "port", str(two.mc_port))
    assert reply == Err("ERR CONFIG SET failed (possibly related to argument 'port') - "
                        "Unable to listen on this port. Check server logs.")
    assert c.cmd("CONFIG", "GET", "port") == [b"port", str(two.port).encode()]
    assert c.cmd("PING") == "PONG"
    c.close()
