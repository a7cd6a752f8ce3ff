"""Several worker processes on one port and one store (`--workers 2`): a write
through one worker is read back at once through the other; CLIENT LIST shows
the clients of both; CLIENT KILL reaches a client of the other worker; and a
worker killed with SIGKILL is replaced by the supervisor while every write it
acknowledged stays readable."""

import os
import re
import signal
import threading
import time

import pytest

from shoaltest import Raw, children_of, wait_for

pytestmark = pytest.mark.shoal_only


def worker_of(conn):
    info = conn.cmd("CLIENT", "INFO").decode()
    m = re.search(r"(?:^| )worker=(\d+)", info)
    assert m, f"no worker= in CLIENT INFO: {info!r}"
    return int(m.group(1))


def one_connection_per_worker(server, workers=2, tries=400):
    """Opens connections until every worker slot has one; returns {slot: conn}
    and closes the spare ones."""
    found, spare = {}, []
    for _ in range(tries):
        c = server.raw()
        slot = worker_of(c)
        if slot in found:
            spare.append(c)
        else:
            found[slot] = c
        if len(found) == workers:
            break
    for c in spare:
        c.close()
    assert sorted(found) == list(range(workers)), f"only saw worker slots {sorted(found)}"
    return found


def slot_pids(server):
    """{slot: pid} of the supervisor's worker children, from their argv."""
    out = {}
    for pid in children_of(server.pid):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"--slot" in argv:
            out[int(argv[argv.index(b"--slot") + 1])] = pid
    return out


@pytest.fixture
def two(make_server):
    return make_server(workers=2)


def test_both_workers_serve_the_same_store(two):
    conns = one_connection_per_worker(two)
    try:
        a, b = conns[0], conns[1]
        for i in range(200):
            w, rd = (a, b) if i % 2 == 0 else (b, a)
            assert w.cmd("SET", f"k{i}", f"v{i}") == "OK"
            assert rd.cmd("GET", f"k{i}") == f"v{i}".encode()
            assert rd.cmd("DEL", f"k{i}") == 1
            assert w.cmd("EXISTS", f"k{i}") == 0
        # other databases too
        a.cmd("SELECT", "4")
        b.cmd("SELECT", "4")
        assert a.cmd("SET", "x", "in4", "EX", "100") == "OK"
        assert b.cmd("GET", "x") == b"in4"
    finally:
        for c in conns.values():
            c.close()


def test_expiry_set_on_one_worker_is_seen_on_the_other(two):
    conns = one_connection_per_worker(two)
    try:
        assert conns[0].cmd("SET", "x", "v", "EX", "100") == "OK"
        assert conns[1].cmd("TTL", "x") in range(1, 101)
        assert conns[1].cmd("PERSIST", "x") == 1
        assert conns[0].cmd("TTL", "x") == -1
    finally:
        for c in conns.values():
            c.close()


def test_client_list_shows_clients_of_both_workers(two):
    conns = one_connection_per_worker(two)
    try:
        ids = {slot: c.cmd("CLIENT", "ID") for slot, c in conns.items()}
        assert ids[0] != ids[1]
        for slot, c in conns.items():
            c.cmd("CLIENT", "SETNAME", f"on-worker-{slot}")
        listing = conns[0].cmd("CLIENT", "LIST").decode().splitlines()
        by_name = {}
        for line in listing:
            m = re.search(r" name=(\S*) ", line)
            by_name[m.group(1)] = line
        for slot in (0, 1):
            line = by_name[f"on-worker-{slot}"]
            assert f"id={ids[slot]} " in line
            assert re.search(rf"(?:^| )worker={slot}(?: |$)", line)
        # the same listing from the other worker
        assert {re.search(r" name=(\S*) ", l).group(1)
                for l in conns[1].cmd("CLIENT", "LIST").decode().splitlines()} >= {
            "on-worker-0", "on-worker-1"}
    finally:
        for c in conns.values():
            c.close()


def test_client_kill_id_on_the_other_worker(two):
    conns = one_connection_per_worker(two)
    try:
        victim_id = conns[1].cmd("CLIENT", "ID")
        assert conns[0].cmd("CLIENT", "KILL", "ID", str(victim_id)) == 1
        data, closed = conns[1].read_all(timeout=5)
        assert closed and data == b""
        assert conns[0].cmd("PING") == "PONG"
        ids = [re.search(r"id=(\d+)", l).group(1)
               for l in conns[0].cmd("CLIENT", "LIST").decode().splitlines()]
        assert str(victim_id) not in ids
    finally:
        for c in conns.values():
            c.close()


def test_client_kill_addr_on_the_other_worker(two):
    conns = one_connection_per_worker(two)
    try:
        addr = "%s:%d" % conns[0].sock.getsockname()
        assert conns[1].cmd("CLIENT", "KILL", "ADDR", addr) == 1
        _, closed = conns[0].read_all(timeout=5)
        assert closed
    finally:
        for c in conns.values():
            c.close()


def test_client_kill_and_list_by_type_on_both_workers(two):
    """As in Redis, a subscriber is of type pubsub, not normal: Sentinel's
    `CLIENT KILL TYPE normal` on a server it reconfigures closes the plain
    clients of every worker and spares the subscribers (its own hello
    links among them)."""
    killer = one_connection_per_worker(two)
    subscribers = one_connection_per_worker(two)
    plain = one_connection_per_worker(two)
    try:
        for slot, c in subscribers.items():
            assert c.cmd("SUBSCRIBE", f"ch{slot}")[0] == b"subscribe"
        listed = killer[0].cmd("CLIENT", "LIST", "TYPE", "pubsub").decode().splitlines()
        sub_ids = {re.search(r"id=(\d+)", line).group(1) for line in listed}
        assert len(sub_ids) == 2
        normal = killer[0].cmd("CLIENT", "LIST", "TYPE", "normal").decode()
        assert not any(f"id={i} " in normal for i in sub_ids)
        assert killer[0].cmd("CLIENT", "LIST", "TYPE", "replica") == b""
        assert killer[0].cmd("CLIENT", "KILL", "TYPE", "master") == 0

        # The caller is spared (SKIPME); the other worker's killer is not.
        assert killer[0].cmd("CLIENT", "KILL", "TYPE", "normal") == 3
        for c in list(plain.values()) + [killer[1]]:
            _, closed = c.read_all(timeout=5)
            assert closed
        for c in subscribers.values():
            assert c.cmd("PING") == [b"pong", b""]
        assert killer[0].cmd("CLIENT", "KILL", "TYPE", "pubsub") == 2
        for c in subscribers.values():
            _, closed = c.read_all(timeout=5)
            assert closed
        assert killer[0].cmd("PING") == "PONG"
    finally:
        for group in (killer, subscribers, plain):
            for c in group.values():
                c.close()


def test_worker_crash_loses_no_acknowledged_write(two):
    acked = {}  # key -> value, only for writes the server answered +OK
    acked_lock = threading.Lock()
    stop = threading.Event()
    errors = []
    reconnects = [0]
    slots_seen = set()

    def first_connection(slot, tries=400):
        """SO_REUSEPORT hashes each connection to a worker; half the writers
        start on each slot, so the crash always cuts some of them off."""
        for _ in range(tries):
            conn = Raw(two.port, timeout=5)
            if worker_of(conn) == slot:
                return conn
            conn.close()
        raise AssertionError(f"no connection reached worker {slot}")

    def writer(wid):
        conn = first_connection(wid % 2)
        slots_seen.add(wid % 2)
        i = 0
        while not stop.is_set():
            key, value = f"w{wid}:k{i}", f"value-{wid}-{i}"
            try:
                if conn is None:
                    conn = Raw(two.port, timeout=5)
                reply = conn.cmd("SET", key, value)
            except (OSError, ConnectionError):
                if conn is not None:
                    conn.close()
                conn = None
                reconnects[0] += 1
                time.sleep(0.01)
                continue  # not acknowledged: write the same key again
            if reply != "OK":
                errors.append((key, reply))
                return
            with acked_lock:
                acked[key] = value
            i += 1
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(8)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(acked) >= 5000 and len(slots_seen) == 2, timeout=60,
                 what="writers on both workers")
        before = slot_pids(two)
        assert sorted(before) == [0, 1]
        os.kill(before[1], signal.SIGKILL)
        at_kill = len(acked)
        # the supervisor starts a new worker for slot 1
        wait_for(lambda: slot_pids(two).get(1) not in (None, before[1]), timeout=30,
                 what="a new worker in slot 1")
        wait_for(lambda: len(acked) >= at_kill + 5000, timeout=60,
                 what="writes after the crash")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[:5]
    assert reconnects[0] > 0, "no writer was on the killed worker"
    assert two.proc.poll() is None, "the supervisor died"

    after = slot_pids(two)
    assert sorted(after) == [0, 1] and after[0] == before[0] and after[1] != before[1]
    conns = one_connection_per_worker(two)  # both slots serve again
    try:
        listing = conns[0].cmd("CLIENT", "LIST").decode()
        assert "worker=0" in listing and "worker=1" in listing
        for c in conns.values():
            keys = list(acked)
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                got = c.pipeline(*[("GET", k) for k in chunk])
                bad = [(k, g) for k, g in zip(chunk, got) if g != acked[k].encode()]
                assert not bad, f"{len(bad)} acknowledged writes lost or wrong, e.g. {bad[:3]}"
    finally:
        for c in conns.values():
            c.close()
