"""Socket sharding in operation (issue 8): how connections spread over the
workers, `shoal ctl scale` and `shoal ctl upgrade` while clients run, a
blocked worker in each balancing mode, `shoal ctl exec` on every worker, and
`shoal ctl status` / `shoal ctl shutdown`.

Every test drives real processes: a `shoal serve` from shoaltest.Server and
the `shoal ctl` client, which talks to the supervisor's control socket
(`/dev/shm/<name>.ctl`). Figures (shares, skews, waits) are printed, never
asserted on time: "a client waited for the blocked worker" is judged by
which worker answered it and whether the blocked worker's own reply was
still pending, not by a clock.
"""

import json
import multiprocessing
import os
import selectors
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from shoaltest import (SHOAL_BIN, Err, Raw, encode, process_gone, raw_on_worker, wait_for,
                       worker_slot, worker_slot_pids)

pytestmark = pytest.mark.shoal_only


# ---------------------------------------------------------------------------
# The control client.


def ctl(server, *args, check=True, timeout=120):
    """Runs `shoal ctl --name <server> ARGS`; returns the CompletedProcess
    (text). `check` fails the test on a non-zero exit, with its output."""
    p = subprocess.run([SHOAL_BIN, "ctl", "--name", server.name, *args],
                       capture_output=True, text=True, timeout=timeout)
    if check:
        assert p.returncode == 0, (f"shoal ctl {' '.join(args)} exited {p.returncode}:\n"
                                   f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def ctl_json(server, *args, timeout=120):
    """`shoal ctl --name <server> SUBCOMMAND --json [ARGS]`'s JSON. The first
    arg is the subcommand; `--json` goes right after it (before any `--`)."""
    p = ctl(server, args[0], "--json", *args[1:], timeout=timeout)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"shoal ctl {' '.join(args)} --json printed no JSON: "
                             f"{p.stdout!r}") from e


def status(server):
    return ctl_json(server, "status")


def control_path(server):
    return Path(f"/dev/shm/{server.name}.ctl")


class Control(Raw):
    """A connection to the control socket itself: RESP2 requests, one
    RESP2 reply each (shoaltest.Raw's parser)."""

    def __init__(self, server, timeout=60.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(control_path(server)))
        self.buf = b""
        self.consumed = b""


def serving_pids(st):
    return {w["slot"]: w["pid"] for w in st["workers"]}


# ---------------------------------------------------------------------------
# status and shutdown


def test_status_json_fields(make_server):
    s = make_server(workers=2)
    c = s.raw()
    for i in range(10):
        assert c.cmd("SET", f"st:{i}", "v") == "OK"
    st = status(s)
    print(json.dumps(st, indent=1))

    sup = st["supervisor"]
    assert sup["pid"] == s.pid
    assert isinstance(sup["version"], str) and sup["version"]
    assert os.path.realpath(sup["binary"]) == os.path.realpath(SHOAL_BIN)
    assert sup["uptime_s"] >= 0
    assert sup["balance"] == "reuseport"
    assert sup["workers_wanted"] == 2

    workers = sorted(st["workers"], key=lambda w: w["slot"])
    assert [w["slot"] for w in workers] == [0, 1]
    assert serving_pids(st) == worker_slot_pids(s)
    for w in workers:
        assert w["state"] == "serving"
        assert w["version"] == sup["version"]
        assert os.path.realpath(w["binary"]) == os.path.realpath(SHOAL_BIN)
        assert w["uptime_s"] >= 0
        assert w["restarts"] == 0
        for field in ("connections", "total_connections", "commands"):
            assert isinstance(w[field], int) and w[field] >= 0, field
        assert w["commands_per_sec"] >= 0
    # Our one connection is on one of the two workers; its commands (ten
    # SETs, one CLIENT INFO) are counted there.
    slot = worker_slot(c)

    def mine():
        w = {w["slot"]: w for w in status(s)["workers"]}[slot]
        return w if w["commands"] >= 11 else None

    w = wait_for(mine, what="the worker's command count to include our 11 commands")
    assert w["connections"] >= 1
    assert w["total_connections"] >= 1

    mem = st["memory"]
    assert mem["segment_bytes"] == 64 << 20
    assert 0 < mem["used_bytes"] <= mem["segment_bytes"]
    assert mem["keys"] == 10
    assert st["log"] == {"enabled": False}
    c.close()


def test_status_json_with_a_log(make_server, tmp_path):
    s = make_server(workers=1, extra_args=["--dir", str(tmp_path / "data"),
                                           "--appendfsync", "always"])
    before = status(s)["log"]
    c = s.raw()
    assert c.cmd("SET", "k", "v") == "OK"
    log = status(s)["log"]
    print(before, log)
    assert log["enabled"] is True
    assert log["policy"] == "always"
    for f in ("head_lsn", "written_lsn", "fsynced_lsn", "snapshot_start_lsn"):
        assert isinstance(log[f], int), f
    # appendfsync always: the SET was acknowledged after its record was
    # fsynced, and nothing else writes.
    assert log["head_lsn"] > before["head_lsn"]
    assert log["fsynced_lsn"] == log["written_lsn"] == log["head_lsn"]
    c.close()


def test_status_table_and_balance_field(make_server):
    s = make_server(workers=2, extra_args=["--balance", "shared"])
    assert status(s)["supervisor"]["balance"] == "shared"
    table = ctl(s, "status").stdout
    print(table)
    for pid in worker_slot_pids(s).values():
        assert str(pid) in table
    assert "serving" in table


def test_control_socket_protocol(make_server):
    s = make_server(workers=1)
    assert control_path(s).exists()
    # Several requests on one connection; an unknown or malformed one is an
    # error reply and the connection stays usable.
    with Control(s) as c:
        bad = c.cmd("NO-SUCH-REQUEST")
        assert isinstance(bad, Err) and bad.startswith("ERR"), bad
        assert json.loads(c.cmd("STATUS"))["supervisor"]["pid"] == s.pid
        assert isinstance(c.cmd("SCALE", "not-a-number"), Err)
        assert isinstance(c.cmd("EXEC", "10", "sideways", "PING"), Err)
        assert json.loads(c.cmd("STATUS"))["supervisor"]["workers_wanted"] == 1


def test_ctl_shutdown(make_server):
    s = make_server(workers=2)
    workers = s.worker_pids()
    assert len(workers) == 2
    p = ctl(s, "shutdown")
    print(p.stdout, p.stderr)
    assert s.proc.wait(30) == 0
    for pid in workers:
        wait_for(lambda: process_gone(pid), what=f"worker {pid} to exit")
    assert not control_path(s).exists(), "the control socket outlived the server"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()


# ---------------------------------------------------------------------------
# Connection spread


def open_and_place(server, n):
    """Opens `n` connections, all held open, and asks each its worker slot;
    returns (connections, {slot: count})."""
    conns, counts = [], {}
    try:
        for _ in range(n):
            c = server.raw()
            conns.append(c)
            slot = worker_slot(c)
            counts[slot] = counts.get(slot, 0) + 1
    except BaseException:
        for c in conns:
            c.close()
        raise
    return conns, counts


def shares_text(counts, n):
    return "  ".join(f"worker {k}: {v / n:.1%} ({v})" for k, v in sorted(counts.items()))


def test_connection_spread_reuseport(make_server):
    n, workers = 1000, 4
    s = make_server(workers=workers)
    conns, counts = open_and_place(s, n)
    try:
        print(f"\nreuseport, {n} connections: {shares_text(counts, n)}")
        assert sorted(counts) == list(range(workers))
        for slot, count in counts.items():
            assert 0.20 <= count / n <= 0.30, (
                f"worker {slot} has {count / n:.1%} of the connections: {shares_text(counts, n)}")

        # ctl status counts the same connections per worker.
        def agree():
            st = status(s)
            got = {w["slot"]: w["connections"] for w in st["workers"]}
            return got if got == counts else None
        wait_for(agree, what=f"ctl status connections to equal {counts}")
    finally:
        for c in conns:
            c.close()


def test_connection_spread_shared(make_server):
    """The shared accept queue: every connection is served; the shares are
    printed (the queue wakes workers in LIFO order, so they need not be
    even)."""
    n, workers = 1000, 4
    s = make_server(workers=workers, extra_args=["--balance", "shared"])
    conns, counts = open_and_place(s, n)
    try:
        print(f"\nshared, {n} connections: {shares_text(counts, n)}")
        assert sum(counts.values()) == n
        assert set(counts) <= set(range(workers))
    finally:
        for c in conns:
            c.close()


# ---------------------------------------------------------------------------
# A client that writes and reads continuously and reconnects on a close.


class Tally:
    """What a reconnecting client saw."""

    def __init__(self):
        self.failures = []         # error replies, wrong values, timeouts
        self.refused_or_reset = 0  # on connect or on a new connection's first batch
        self.refusals = []         # what each of those was, and when
        self.closed_new = 0        # a new connection closed before any reply
        self.closed = 0            # an established connection closed (retried)
        self.connections = 0
        self.batches = 0
        self.slots = set()         # worker slots of its connections (track_slots)
        self.epoch = 0             # set by the test; slots are recorded with it

    def as_dict(self):
        return {k: sorted(v) if isinstance(v, set) else v for k, v in self.__dict__.items()}


def reconnecting_load(port, prefix, stop, tally, acked, progress=None, batch=1,
                      reconnect_every=None, track_slots=False):
    """Writes `<prefix>:<i>` = `v<i>` for i = 0, 1, ... in batches of
    `batch` SETs, each followed in the same pipeline by the GETs of the same
    keys, until `stop` is set. A SET answered OK goes into `acked`; a GET
    must return the value just set. A connection closed by the server (EOF,
    reset, broken pipe) is reopened and the whole batch resent (SET is
    idempotent); a connection refused, or reset on its first batch, is
    counted in `tally.refused_or_reset`. Error replies, wrong values and
    timeouts are failures. `reconnect_every` batches the client closes its
    connection and opens a new one (so new workers get some); with
    `track_slots` each connection's first batch also asks CLIENT INFO for
    its worker slot, recorded in `tally.slots` as (tally.epoch when the
    connection was opened, slot). Anything else that goes wrong ends the
    client as a failure."""
    try:
        load_loop(port, prefix, stop, tally, acked, progress, batch, reconnect_every, track_slots)
    except BaseException as e:
        tally.failures.append(f"{prefix}: client stopped by {e!r}")


def load_loop(port, prefix, stop, tally, acked, progress, batch, reconnect_every, track_slots):
    conn, fresh, i, on_conn = None, True, 0, 0
    while not stop.is_set() and len(tally.failures) < 20:
        if conn is not None and reconnect_every and on_conn >= reconnect_every:
            conn.close()
            conn = None
        if conn is None:
            try:
                epoch = tally.epoch
                conn = Raw(port, timeout=30)
                fresh, on_conn = True, 0
                tally.connections += 1
            except (ConnectionRefusedError, ConnectionResetError) as e:
                tally.refused_or_reset += 1
                tally.refusals.append(f"connect: {e!r} at {time.monotonic():.3f} (epoch {tally.epoch})")
                time.sleep(0.01)
                continue
        keys = [f"{prefix}:{j}" for j in range(i, i + batch)]
        cmds = [("SET", k, f"v{j}") for j, k in zip(range(i, i + batch), keys)]
        cmds += [("GET", k) for k in keys]
        if fresh and track_slots:
            cmds.append(("CLIENT", "INFO"))
        replies = []
        try:
            conn.send(b"".join(encode(*c) for c in cmds))
            for _ in cmds:
                replies.append(conn.reply())
        except TimeoutError:
            tally.failures.append(f"{prefix}: no reply in 30 s (batch at {i})")
            conn.close()
            conn = None
            continue
        except (ConnectionError, OSError) as e:
            for k, r in zip(keys, replies):
                if r == "OK":
                    acked.add(k)
            conn.close()
            conn = None
            if fresh and isinstance(e, ConnectionResetError):
                tally.refused_or_reset += 1
                tally.refusals.append(f"first batch: {e!r} after {len(replies)} replies "
                                      f"at {time.monotonic():.3f} (epoch {tally.epoch})")
            elif fresh and not replies:
                tally.closed_new += 1
            else:
                tally.closed += 1
            continue
        if fresh and track_slots:
            info = replies.pop()
            if isinstance(info, bytes) and b"worker=" in info:
                tally.slots.add((epoch, int(info.split(b"worker=", 1)[1].split()[0])))
            else:
                tally.failures.append(f"CLIENT INFO -> {info!r}")
        fresh = False
        on_conn += 1
        for k, r in zip(keys, replies[:batch]):
            if r == "OK":
                acked.add(k)
            else:
                tally.failures.append(f"SET {k} -> {r!r}")
        for j, (k, r) in enumerate(zip(keys, replies[batch:])):
            if r != f"v{i + j}".encode():
                tally.failures.append(f"GET {k} -> {r!r}, want v{i + j}")
        i += batch
        tally.batches += 1
        if progress is not None:
            with progress.get_lock():
                progress.value += 1
    if conn is not None:
        conn.close()


def missing_writes(port, acked):
    """The acknowledged keys that do not read back their value."""
    missing = []
    keys = sorted(acked)
    with Raw(port, timeout=60) as c:
        for at in range(0, len(keys), 500):
            chunk = keys[at:at + 500]
            for k, v in zip(chunk, c.cmd("MGET", *chunk)):
                if v != f"v{k.rsplit(':', 1)[1]}".encode():
                    missing.append((k, v))
    return missing


# ---------------------------------------------------------------------------
# scale


class ClientThreads:
    """`n` threads of `reconnecting_load` writing keys `<prefix><i>:…` to
    the server at `port`, started at once; `kwargs` go to each."""

    def __init__(self, port, prefix, n, **kwargs):
        self.port = port
        self.stop = threading.Event()
        self.clients = [(Tally(), set()) for _ in range(n)]
        self.threads = [threading.Thread(target=reconnecting_load,
                                         args=(port, f"{prefix}{i}", self.stop, tally, acked),
                                         kwargs=kwargs, daemon=True)
                        for i, (tally, acked) in enumerate(self.clients)]
        for t in self.threads:
            t.start()

    def tallies(self):
        return [tally for tally, _ in self.clients]

    def progressed(self, more):
        """Waits until every client has done `more` more round trips; none
        may have failed meanwhile."""
        want = [t.batches + more for t in self.tallies()]
        wait_for(lambda: all(t.batches >= w for t, w in zip(self.tallies(), want))
                 or any(t.failures for t in self.tallies())
                 or not all(th.is_alive() for th in self.threads),
                 timeout=60, what=f"every client to do {more} more round trips")
        assert not any(t.failures for t in self.tallies()), \
            [t.failures for t in self.tallies()]

    def finish(self):
        """Stops the clients (call it in a `finally`)."""
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def check(self):
        """Prints what each client saw, and checks that none failed, none
        had a connection refused or reset, and every acknowledged write
        reads back."""
        acked = set()
        for n, (tally, mine) in enumerate(self.clients):
            print(f"client {n}: {tally.as_dict()}, {len(mine)} writes acknowledged")
            acked |= mine
        assert not any(t.is_alive() for t in self.threads)
        assert [t.failures for t in self.tallies()] == [[]] * len(self.clients)
        assert [t.refusals for t in self.tallies()] == [[]] * len(self.clients)
        missing = missing_writes(self.port, acked)
        assert missing == [], f"{len(missing)} acknowledged writes lost: {missing[:10]}"


def test_scale_1_3_1_under_load(make_server):
    """Three client threads write and read continuously, each opening a new
    connection every 20 round trips (so the new workers get clients, and
    the removed ones have some to close), while the server goes from 1 to 3
    workers and back."""
    s = make_server(workers=1)
    clients = ClientThreads(s.port, "scale", 3, reconnect_every=20, track_slots=True)
    try:
        clients.progressed(100)
        for epoch, (frm, to) in enumerate(((1, 3), (3, 1)), start=1):
            began = time.monotonic()
            reply = ctl_json(s, "scale", str(to))
            print(f"scale {frm} -> {to}: {reply} ({began:.3f} to {time.monotonic():.3f})")
            # Connections opened from now on are opened after the change.
            for tally in clients.tallies():
                tally.epoch = epoch
            assert reply == {"from": frm, "to": to}
            st = status(s)
            assert st["supervisor"]["workers_wanted"] == to
            assert sorted(w["slot"] for w in st["workers"]) == list(range(to)), st["workers"]
            assert all(w["state"] == "serving" for w in st["workers"]), st["workers"]
            assert all(w["restarts"] == 0 for w in st["workers"]), st["workers"]
            assert serving_pids(st) == worker_slot_pids(s)
            clients.progressed(300)
            seen = {slot for tally in clients.tallies() for e, slot in tally.slots if e == epoch}
            print(f"  the clients' new connections reached workers {sorted(seen)}")
            assert seen <= set(range(to))
            if to == 3:
                assert seen == {0, 1, 2}
    finally:
        clients.finish()
    clients.check()


def test_scale_down_steers_new_connections_away(make_server):
    """Thirty rounds of 1 -> 3 -> 1 while eight clients open a new connection
    for every round trip: a removed worker's listening socket must get no
    new connection once it drains (the supervisor steers its port's group
    to the sockets that stay), so none is queued on it when it closes and
    reset. Without the steering, about one run in two saw a reset."""
    s = make_server(workers=1)
    clients = ClientThreads(s.port, "steer", 8, reconnect_every=1)
    try:
        clients.progressed(10)
        for _ in range(30):
            assert ctl_json(s, "scale", "3") == {"from": 1, "to": 3}
            time.sleep(0.05)
            assert ctl_json(s, "scale", "1") == {"from": 3, "to": 1}
            time.sleep(0.05)
    finally:
        clients.finish()
    clients.check()


def client_fields(conn):
    info = conn.cmd("CLIENT", "INFO")
    return dict(f.split("=", 1) for f in info.decode().split() if "=" in f)


def test_scale_down_drains_and_hands_over(make_server):
    """A removed worker finishes the request in flight and answers it; its
    idle connections move to a remaining worker with their state (id, db,
    name), so those clients see no disconnect; a subscribed connection,
    which cannot move, is closed with a FIN, not a reset."""
    s = make_server(workers=3)
    busy = raw_on_worker(s, 2, timeout=30)
    idle = raw_on_worker(s, 1, timeout=30)
    sub = raw_on_worker(s, 2, timeout=30)
    assert idle.cmd("SELECT", "3") == "OK"
    assert idle.cmd("CLIENT", "SETNAME", "idle-one") == "OK"
    assert idle.cmd("SET", "drain:idle", "1") == "OK"
    before = client_fields(idle)
    assert sub.cmd("SUBSCRIBE", "drain-channel") == [b"subscribe", b"drain-channel", 1]
    busy.send(encode("DEBUG", "SLEEP", "0.5") + encode("SET", "drain:busy", "1"))
    time.sleep(0.1)  # the sleep is under way when the scale starts
    assert ctl_json(s, "scale", "1") == {"from": 3, "to": 1}
    assert busy.reply() == "OK"
    assert busy.reply() == "OK"
    after = client_fields(idle)
    print(f"\nidle connection before: {before}\nafter: {after}")
    assert after["worker"] == "0"
    assert {k: after[k] for k in ("id", "name", "db", "addr")} == \
        {k: before[k] for k in ("id", "name", "db", "addr")}
    assert idle.cmd("GET", "drain:idle") == b"1"  # still on db 3
    assert client_fields(busy)["worker"] == "0"
    assert busy.cmd("GET", "drain:busy") == b"1"
    data, closed = sub.read_all(timeout=10)
    assert (data, closed) == (b"", True), "the subscriber was not closed cleanly"
    for c in (busy, idle, sub):
        c.close()


def test_upgrade_closes_memcached_and_http_connections_gracefully(make_server):
    """Memcached and HTTP connections are not handed over: the replaced
    worker answers what it read, sends a FIN, and then keeps reading (and
    dropping) what the client sends until the client closes, so a request
    sent after the FIN never draws a reset. A new connection then finds the
    data."""
    s = make_server(workers=1)
    mc = socket.create_connection(("127.0.0.1", s.mc_port), timeout=10)
    mc.sendall(b"set up:mc 0 0 2\r\nok\r\n")
    assert mc.recv(100) == b"STORED\r\n"
    web = socket.create_connection(("127.0.0.1", s.http_port), timeout=10)
    web.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert web.recv(4096).startswith(b"HTTP/1.1 200")
    upgrade = threading.Thread(target=ctl_json, args=(s, "upgrade"), daemon=True)
    upgrade.start()
    try:
        for conn, late_request in ((mc, b"get up:mc\r\n"),
                                   (web, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")):
            assert conn.recv(4096) == b"", "the connection was not closed with a FIN"
            # The worker still reads: this request is dropped, and draws
            # no reset (a reset after the FIN shows only as the socket's
            # error, not to recv).
            conn.sendall(late_request)
            time.sleep(0.2)
            assert conn.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
            assert conn.recv(4096) == b""
    finally:
        mc.close()
        web.close()
        upgrade.join(60)
    assert not upgrade.is_alive()
    with socket.create_connection(("127.0.0.1", s.mc_port), timeout=10) as again:
        again.sendall(b"get up:mc\r\n")
        assert again.recv(100) == b"VALUE up:mc 0 2\r\nok\r\nEND\r\n"


# ---------------------------------------------------------------------------
# upgrade


def upgrade_client(port, prefix, stop, progress, out, reconnect_every):
    """One client process of the upgrade test (forked): pipelines batches
    of 10 SETs and 10 GETs until `stop`, opening a new connection every
    `reconnect_every` batches (None: only when the server closed it), then
    puts its tally and acked keys on `out`."""
    tally, acked = Tally(), set()
    reconnecting_load(port, prefix, stop, tally, acked, progress=progress, batch=10,
                      reconnect_every=reconnect_every)
    out.put((prefix, tally.as_dict(), sorted(acked)))


class ClientProcesses:
    """Forked `upgrade_client`s, one per entry of `reconnect`, writing keys
    `<prefix><n>:…` to the server at `port`."""

    def __init__(self, port, prefix, reconnect):
        ctx = multiprocessing.get_context("fork")
        self.stop, self.out = ctx.Event(), ctx.Queue()
        self.progress = [ctx.Value("q", 0) for _ in reconnect]
        self.procs = [ctx.Process(target=upgrade_client,
                                  args=(port, f"{prefix}{n}", self.stop, self.progress[n],
                                        self.out, every),
                                  daemon=True) for n, every in enumerate(reconnect)]
        for p in self.procs:
            p.start()

    def progressed(self, rounds):
        """Waits until every client has done `rounds` more batches."""
        want = [p.value + rounds for p in self.progress]
        wait_for(lambda: all(p.value >= w for p, w in zip(self.progress, want))
                 or not all(pr.is_alive() for pr in self.procs),
                 timeout=60, what=f"every client to do {rounds} more batches")

    def finish(self):
        """Stops the clients; returns {prefix: (tally, acked keys)}."""
        self.stop.set()
        results = {}
        for _ in self.procs:
            try:
                prefix, t, acked = self.out.get(timeout=120)
                results[prefix] = (t, acked)
            except Exception:
                break
        for p in self.procs:
            p.join(30)
            if p.is_alive():
                p.kill()
        return results


def check_clients(results, port, clients):
    """Every client reported, none failed or had a connection refused or
    reset, and every acknowledged write is there; returns the written keys."""
    assert len(results) == clients, f"only {len(results)} clients reported"
    all_acked = set()
    for prefix, (t, acked) in sorted(results.items()):
        print(f"{prefix}: {len(acked)} writes acknowledged, {t}")
        all_acked |= set(acked)
    failures = [f for t, _ in results.values() for f in t["failures"]]
    assert failures == []
    assert sum(t["refused_or_reset"] for t, _ in results.values()) == 0
    missing = missing_writes(port, all_acked)
    assert missing == [], f"{len(missing)} acknowledged writes lost: {missing[:10]}"
    return all_acked


def test_rolling_upgrade_under_load(make_server, tmp_path):
    s = make_server(workers=2)
    copy = tmp_path / "shoal-copy"
    shutil.copy2(SHOAL_BIN, copy)
    # One client keeps its connection (handed over or closed by each
    # upgrade); two open a new one every other batch, so that connection
    # attempts arrive all through each upgrade.
    clients = ClientProcesses(s.port, "up", reconnect=[None, 2, 2])
    progressed = clients.progressed
    try:
        progressed(20)
        pids = worker_slot_pids(s)
        for n in range(10):
            args = ["upgrade"] + (["--binary", str(copy)] if n % 2 else [])
            reply = ctl_json(s, *args, timeout=300)
            st = status(s)
            new = serving_pids(st)
            # Each new worker takes a free slot number and the old one's
            # listeners: (old_slot, old_pid) -> (slot, new_pid).
            replaced = reply["replaced"]
            print(f"upgrade {n + 1}{' --binary copy' if n % 2 else ''}: "
                  + ", ".join(f"slot {r['old_slot']} pid {r['old_pid']} -> slot {r['slot']} "
                              f"pid {r['new_pid']} in {r['ms']:.0f} ms" for r in replaced))
            assert len(replaced) == 2
            assert {r["old_slot"]: r["old_pid"] for r in replaced} == pids
            assert {r["slot"]: r["new_pid"] for r in replaced} == new
            assert not set(new.values()) & set(pids.values()), (pids, new)
            assert new == worker_slot_pids(s)
            assert all(w["state"] == "serving" for w in st["workers"])
            # A worker started by an upgrade replaced one that exited
            # cleanly: not a restart.
            assert [w["restarts"] for w in st["workers"]] == [0, 0], st["workers"]
            for pid in pids.values():
                wait_for(lambda: process_gone(pid), what=f"old worker {pid} to exit")
            if n % 2:
                assert all(os.path.realpath(w["binary"]) == str(copy.resolve())
                           for w in st["workers"]), st["workers"]
                assert os.path.realpath(reply["binary"]) == str(copy.resolve())
            pids = new
            progressed(20)
    finally:
        results = clients.finish()
    check_clients(results, s.port, 3)


def test_supervisor_upgrade_under_load(make_server, tmp_path):
    """`ctl upgrade --supervisor`: the supervisor re-executes itself (same
    pid) while its workers keep serving; they reconnect and give their
    listening sockets back. Clients see nothing; afterwards the new image
    scales, upgrades workers, restarts a killed one and keeps the log."""
    data = tmp_path / "data"
    s = make_server(workers=2, extra_args=["--dir", str(data)])
    copy = tmp_path / "shoal-copy"
    shutil.copy2(SHOAL_BIN, copy)
    clients = ClientProcesses(s.port, "sup", reconnect=[None, 2])
    progressed = clients.progressed
    try:
        progressed(20)
        pids = worker_slot_pids(s)
        for n in range(3):
            args = ["upgrade", "--supervisor"] + (["--binary", str(copy)] if n % 2 else [])
            reply = ctl_json(s, *args, timeout=120)
            print(f"supervisor upgrade {n + 1}: {reply}")
            st = status(s)
            assert reply["pid"] == s.pid == st["supervisor"]["pid"]
            assert s.proc.poll() is None, "the supervisor process ended"
            # The workers were not touched: same pids, all serving, and the
            # new image knows each one.
            assert serving_pids(st) == pids == worker_slot_pids(s)
            assert all(w["state"] == "serving" for w in st["workers"])
            assert st["supervisor"]["reconnecting"] == 0
            assert st["log"]["enabled"] is True
            # Without --binary the supervisor runs its current file again.
            expect = copy if n >= 1 else Path(SHOAL_BIN)
            assert os.path.realpath(st["supervisor"]["binary"]) == str(expect.resolve())
            progressed(20)
        # The new image runs the server as the first did.
        assert ctl_json(s, "scale", "3") == {"from": 2, "to": 3}
        progressed(10)
        assert ctl_json(s, "scale", "1") == {"from": 3, "to": 1}
        progressed(10)
        assert len(ctl_json(s, "upgrade")["replaced"]) == 1
        progressed(10)
    finally:
        results = clients.finish()
    all_acked = check_clients(results, s.port, 2)
    # A worker the new image started dies: it is started again.
    victim = next(iter(worker_slot_pids(s).values()))
    os.kill(victim, 9)
    wait_for(lambda: victim not in worker_slot_pids(s).values()
             and len(worker_slot_pids(s)) == 1, timeout=30,
             what="the killed worker to be started again")
    # The log went on through every image: a reboot brings it all back.
    s.stop()
    s.start()
    assert missing_writes(s.port, all_acked) == []


# ---------------------------------------------------------------------------
# A blocked worker


def client_info_after_pong(buf):
    """The CLIENT INFO text once "+PONG" and the whole bulk reply after it
    are in `buf`, else None."""
    head = b"+PONG\r\n$"
    if not buf.startswith(head) or b"\r\n" not in buf[len(head):]:
        return None
    size, rest = buf[len(head):].split(b"\r\n", 1)
    if len(rest) < int(size) + 2:
        return None
    return rest[:int(size)].decode()


def clients_while_blocked(server, every=0.01, window=2.0, sleep_s=5):
    """Blocks one worker with `DEBUG SLEEP <sleep_s>` and, while its reply is
    pending, connects a new client every `every` s for `window` s, each
    sending PING and CLIENT INFO pipelined. Returns (blocked slot, clients),
    each client a dict: slot (from CLIENT INFO), answered_while_blocked (its
    PONG arrived before the DEBUG SLEEP reply), wait_s (connect to PONG)."""
    blocker = server.raw(timeout=60)
    blocked = worker_slot(blocker)
    blocker.send(encode("DEBUG", "SLEEP", sleep_s))
    # A moment for the worker to read the command and fall asleep; a client
    # it still served before that would only make the figures milder.
    time.sleep(0.2)

    sel = selectors.DefaultSelector()
    blocker.sock.setblocking(False)
    sel.register(blocker.sock, selectors.EVENT_READ, None)
    sleep_reply = b""
    clients = []
    start = time.monotonic()
    next_at = start
    deadline = start + sleep_s + 30

    def pending():
        return [c for c in clients if c["slot"] is None]

    try:
        while time.monotonic() < deadline:
            now = time.monotonic()
            if not sleep_reply and now - start < window and now >= next_at:
                s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(encode("PING") + encode("CLIENT", "INFO"))
                s.setblocking(False)
                c = {"sock": s, "buf": b"", "t0": now, "slot": None, "wait_s": None,
                     "answered_while_blocked": None}
                clients.append(c)
                sel.register(s, selectors.EVENT_READ, c)
                next_at += every
            if sleep_reply and not pending():
                break
            timeout = max(0.0, next_at - time.monotonic()) if not sleep_reply else 0.5
            events = sel.select(timeout)
            # The blocked worker's reply first: a PONG read in the same
            # wake-up counts as answered after the sleep ended.
            for key, _ in sorted(events, key=lambda e: e[0].data is not None):
                c = key.data
                if c is None:
                    sleep_reply += blocker.sock.recv(4096)
                    if not sleep_reply:
                        raise AssertionError("the blocked worker closed the connection")
                    continue
                data = c["sock"].recv(4096)
                if not data:
                    raise AssertionError("a new client's connection was closed")
                c["buf"] += data
                if c["wait_s"] is None and c["buf"].startswith(b"+PONG\r\n"):
                    c["wait_s"] = time.monotonic() - c["t0"]
                    c["answered_while_blocked"] = not sleep_reply
                info = client_info_after_pong(c["buf"])
                if info is not None:
                    c["slot"] = int(info.split("worker=", 1)[1].split()[0])
                    sel.unregister(c["sock"])
    finally:
        for c in clients:
            c["sock"].close()
        blocker.close()
    assert sleep_reply.startswith(b"+OK"), f"DEBUG SLEEP answered {sleep_reply!r}"
    unanswered = len(pending())
    assert unanswered == 0, f"{unanswered} of {len(clients)} clients never got an answer"
    return blocked, clients


def describe(blocked, clients):
    on_blocked = [c for c in clients if c["slot"] == blocked]
    waits = sorted(c["wait_s"] for c in clients)
    return (f"{len(clients)} clients, {len(on_blocked)} on the blocked worker {blocked}; "
            f"answered while it slept: {sum(c['answered_while_blocked'] for c in clients)}; "
            f"wait median {waits[len(waits) // 2] * 1000:.1f} ms, "
            f"max {waits[-1] * 1000:.1f} ms")


def test_busy_worker_shared_no_client_waits(make_server):
    s = make_server(workers=2, extra_args=["--balance", "shared"])
    blocked, clients = clients_while_blocked(s)
    print(f"\nshared: {describe(blocked, clients)}")
    assert clients
    assert [c for c in clients if c["slot"] == blocked] == [], \
        "the blocked worker was handed new connections"
    late = [c for c in clients if not c["answered_while_blocked"]]
    assert late == [], f"{len(late)} of {len(clients)} clients waited for the blocked worker"


def test_busy_worker_reuseport_shows_the_hang(make_server):
    """kdb+'s finding: SO_REUSEPORT keeps handing a blocked listener its
    share of new connections, and those clients hang until it is free."""
    s = make_server(workers=2)
    blocked, clients = clients_while_blocked(s)
    hung = [c for c in clients if c["slot"] == blocked and not c["answered_while_blocked"]]
    print(f"\nreuseport: {describe(blocked, clients)}; "
          f"{len(hung)} of {len(clients)} clients hung until the sleep ended")
    assert hung, "no new client waited for the blocked worker"
    # The other worker answered its share at once.
    assert all(c["answered_while_blocked"] for c in clients if c["slot"] != blocked)


# ---------------------------------------------------------------------------
# exec


@pytest.mark.parametrize("mode", ["spin", "naive"])
def test_exec_runs_once_on_every_worker(make_server, mode):
    s = make_server(workers=2)
    c = s.raw()
    pids = worker_slot_pids(s)
    for run in range(1, 4):
        extra = ["--naive"] if mode == "naive" else []
        reply = ctl_json(s, "exec", *extra, "--", "INCR", "execcount")
        print(f"{mode} run {run}: max skew {reply['max_skew_us']:.2f} us, offsets "
              + ", ".join(f"slot {w['slot']} {w['start_offset_us']:.2f} us"
                          for w in reply["workers"]))
        assert reply["mode"] == mode
        workers = sorted(reply["workers"], key=lambda w: w["slot"])
        assert {w["slot"]: w["pid"] for w in workers} == pids
        assert sorted(w["reply"] for w in workers) == [f":{2 * run - 1}\r\n", f":{2 * run}\r\n"]
        offsets = [w["start_offset_us"] for w in workers]
        assert reply["max_skew_us"] == pytest.approx(max(offsets) - min(offsets), abs=0.01)
        assert reply["max_skew_us"] >= 0
        if mode == "spin":
            # A spinner never starts before the target.
            assert min(offsets) >= 0
        assert c.cmd("GET", "execcount") == str(2 * run).encode()
    c.close()


def test_exec_at_and_error_reply(make_server):
    s = make_server(workers=2)
    reply = ctl_json(s, "exec", "--at", "+100", "--", "SET", "execat", "x")
    print(reply)
    assert reply["at_ms"] == 100
    assert [w["reply"] for w in reply["workers"]] == ["+OK\r\n", "+OK\r\n"]
    # An error reply of the command is reported per worker, not hidden.
    reply = ctl_json(s, "exec", "--", "INCR", "execat")
    assert all(w["reply"].startswith("-ERR") for w in reply["workers"]), reply
