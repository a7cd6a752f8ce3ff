"""The synchronous mode (`replica-sync-count`), FAILOVER's write gate and
`replica-serve-stale-data` between real processes (docs/replication.md)."""

import http.client
import os
import re
import signal
import socket
import threading
import time

import pytest
import redis

from shoaltest import DurableServer, Server, info_section, raw_on_worker, Raw, stopped, wait_for

pytestmark = pytest.mark.shoal_only


def link(server):
    with Raw(server.port) as c:
        return info_section(c, "replication")


def pair(tmp_path, sync_count=0, primary_env=None, replica_fsync="everysec"):
    """A primary (`replica-sync-count` set as CONFIG SET does: started with
    `--dir`, a Redis parameter on the command line would make `--dir` the
    working directory) and its replica, not started yet."""
    primary = DurableServer(tmp_path / "primary", env=primary_env).start()
    if sync_count:
        assert primary.client().config_set("replica-sync-count", sync_count) is True
    replica = DurableServer(tmp_path / "replica", appendfsync=replica_fsync,
                            extra_args=["--replicaof", f"127.0.0.1:{primary.port}"])
    return primary, replica


def online(primary, n=1):
    wait_for(lambda: link(primary).get("slave0", "").count("state=online") == 1
             and int(link(primary)["connected_slaves"]) >= n,
             timeout=60, what="the replica to be online")


def memcached_set(port, key, value):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"set {key} 0 0 {len(value)}\r\n{value}\r\n".encode())
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += s.recv(100)
        return reply


def test_every_acknowledged_write_is_on_the_replica_when_its_reply_arrives(tmp_path):
    """With `replica-sync-count 1`, a write's reply leaves only once the
    replica applied it: a read on the replica right after the reply sees it,
    for writes from RESP, memcached and HTTP alike."""
    primary, rep = pair(tmp_path, sync_count=1)
    try:
        rep.start()
        online(primary)
        p, r = primary.client(), rep.client()
        assert p.config_get("replica-sync-count") == {"replica-sync-count": "1"}
        fields = link(primary)
        assert fields["shoal_sync_replicas"] == "1" and fields["shoal_sync_timeout"] == "0"
        for i in range(300):
            assert p.set(f"k{i}", i) is True
            assert r.get(f"k{i}") == str(i)
            assert p.incr("counter") == i + 1
            assert r.get("counter") == str(i + 1)
        pipe = p.pipeline(transaction=False)
        for i in range(100):
            pipe.rpush("list", i)
        pipe.execute()
        assert r.llen("list") == 100
        for i in range(50):
            assert memcached_set(primary.mc_port, f"mc{i}", f"v{i}") == b"STORED\r\n"
            assert r.get(f"mc{i}") == f"v{i}"
            h = http.client.HTTPConnection("127.0.0.1", primary.http_port, timeout=10)
            h.request("PUT", f"/http{i}", body=f"h{i}")
            assert h.getresponse().status == 201
            h.close()
            assert r.get(f"http{i}") == f"h{i}"
        assert int(link(primary)["shoal_sync_acked_lsn"]) > 0
    finally:
        rep.stop()
        primary.stop()


def test_a_stopped_replica_holds_write_replies_while_reads_are_served(tmp_path):
    """The replica's supervisor SIGSTOPped: a write is applied on the
    primary but its reply waits until SIGCONT, while the same worker keeps
    answering other clients. With `replica-sync-timeout` the reply leaves
    at the timeout."""
    primary, rep = pair(tmp_path, sync_count=1)
    try:
        rep.start()
        online(primary)
        p = primary.client()
        p.set("before", 1)
        writer = raw_on_worker(primary, 0)
        reader = raw_on_worker(primary, 0)
        stopped(rep.proc.pid)
        try:
            writer.send(b"*3\r\n$3\r\nSET\r\n$4\r\nheld\r\n$1\r\n1\r\n")
            # The write is in the primary; its reply waits.
            wait_for(lambda: reader.cmd("GET", "held") == b"1", what="the write on the primary")
            for _ in range(20):
                assert reader.cmd("GET", "before") == b"1"
            assert writer.read_all(timeout=0.5) == (b"", False)
            writer.sock.settimeout(30)
        finally:
            os.kill(rep.proc.pid, signal.SIGCONT)
        assert writer.reply() == "OK"
        assert rep.client().get("held") == "1"
        # A timeout: the reply leaves at the timeout, the write applied.
        assert p.config_set("replica-sync-timeout", 200) is True
        stopped(rep.proc.pid)
        try:
            assert p.set("timed", 1) is True
        finally:
            os.kill(rep.proc.pid, signal.SIGCONT)
        assert p.execute_command("WAIT", 1, 10000) == 1
        assert rep.client().get("timed") == "1"
        writer.close()
        reader.close()
    finally:
        rep.stop()
        primary.stop()


def test_more_sync_replicas_than_connected_refuses_writes(tmp_path):
    """N=2 with one replica: no reply could follow a write, so writes are
    refused before they run (min-replicas-to-write's NOREPLICAS); reads go
    on; N=1 again takes writes."""
    primary, rep = pair(tmp_path)
    try:
        rep.start()
        online(primary)
        p = primary.client()
        p.set("k", "v")
        assert p.config_set("replica-sync-count", 2) is True
        with pytest.raises(redis.exceptions.ResponseError, match="^NOREPLICAS Not enough good replicas to write.$"):
            p.set("k", "w")
        assert p.get("k") == "v"
        assert link(primary)["shoal_sync_replicas"] == "2"
        assert p.config_set("replica-sync-count", 1) is True
        wait_for(lambda: _set_ok(p), what="writes with one sync replica")
        assert rep.client().get("k") == "w"
    finally:
        rep.stop()
        primary.stop()


def _set_ok(p):
    try:
        return p.set("k", "w") is True
    except redis.exceptions.ResponseError:
        return False


def test_replica_with_appendfsync_always_under_the_sync_mode(tmp_path):
    """A replica started with `--appendfsync always` follows a primary in
    the synchronous mode: every reply still means the replica applied the
    write (the mode waits for the applied LSN; see docs/replication.md for
    what a replica's own disk holds)."""
    primary, rep = pair(tmp_path, sync_count=1, replica_fsync="always")
    try:
        rep.start()
        online(primary)
        p, r = primary.client(), rep.client()
        for i in range(100):
            p.set(f"d{i}", i)
            assert r.get(f"d{i}") == str(i)
    finally:
        rep.stop()
        primary.stop()


def test_sigkilled_primary_loses_no_acknowledged_write(tmp_path):
    """RPO 0: four clients write under the synchronous mode, the primary is
    SIGKILLed, the replica is promoted: every write whose reply arrived is
    there."""
    primary, rep = pair(tmp_path, sync_count=1)
    try:
        rep.start()
        online(primary)
        acked = {}
        stop = threading.Event()

        def writer(n):
            c = primary.client()
            i = 0
            while not stop.is_set():
                try:
                    acked[f"w{n}"] = c.incr(f"w{n}")
                    c.set(f"w{n}:{i}", i)
                    acked[f"w{n}:{i}"] = i
                    i += 1
                except (redis.exceptions.ConnectionError, redis.exceptions.ResponseError):
                    return

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        wait_for(lambda: len(acked) > 3000, timeout=60, what="writes before the kill")
        primary.kill_all()
        stop.set()
        for t in threads:
            t.join()
        r = rep.client()
        assert r.execute_command("REPLICAOF", "NO", "ONE") == "OK"
        wait_for(lambda: link(rep)["role"] == "master", what="the promotion")
        # A counter may be one ahead of its last reply: the INCR in flight
        # when the primary died may have reached the replica first.
        counters = [f"w{n}" for n in range(4)]
        for k, v in zip(counters, r.mget(counters)):
            assert acked[k] <= int(v) <= acked[k] + 1, k
        keys = [k for k in acked if k not in counters]
        for start in range(0, len(keys), 1000):
            chunk = keys[start:start + 1000]
            assert [int(v) for v in r.mget(chunk)] == [acked[k] for k in chunk]
    finally:
        rep.stop()
        primary.stop()


def relay_bytes(replica):
    """Everything in the replica's relay files (`<dir>/relay/`)."""
    files = sorted((replica.dir / "relay").iterdir())
    return b"".join(f.read_bytes() for f in files if f.is_file())


def test_disk_level_acknowledged_writes_are_in_the_replicas_relay_files(tmp_path):
    """`replica-sync-level disk` with one replica with `--dir`: a write's
    reply leaves once the replica acknowledged its fsynced relay up to the
    write. Proved here: after each acknowledged write the primary's published
    disk LSN (`shoal_sync_durable_lsn`) is at or past the primary's log head
    (the write's end), and after a SIGKILL of every replica process right
    after the last reply, every acknowledged value is in the replica's relay
    files; restarted on its directory, the replica resumes partially. (A
    SIGKILL keeps the page cache, so this cannot tell an fsync from a plain
    write: that the relay is fsynced before `D` is the code's word.)"""
    primary, rep = pair(tmp_path, sync_count=1)
    try:
        rep.start()
        online(primary)
        p = primary.client()
        assert p.config_get("replica-sync-level") == {"replica-sync-level": "memory"}
        assert link(primary)["shoal_sync_level"] == "memory"
        assert p.config_set("replica-sync-level", "disk") is True
        assert p.config_get("replica-sync-level") == {"replica-sync-level": "disk"}
        # Counted at the disk level once its first disk acknowledgement came.
        wait_for(lambda: _set_ok(p), what="a write at the disk level")
        fields = link(primary)
        assert fields["shoal_sync_level"] == "disk"
        values = {}
        for i in range(200):
            values[f"disk{i}"] = f"durable-{os.getpid()}-{i}-value"
            assert p.set(f"disk{i}", values[f"disk{i}"]) is True
            if i % 20 == 0:
                with Raw(primary.port) as c:
                    head = int(info_section(c, "persistence")["shoal_log_head_lsn"])
                assert int(link(primary)["shoal_sync_durable_lsn"]) >= head
        pipe = p.pipeline(transaction=False)
        for i in range(100):
            values[f"piped{i}"] = f"piped-{os.getpid()}-{i}-value"
            pipe.set(f"piped{i}", values[f"piped{i}"])
        pipe.execute()
        with Raw(primary.port) as c:
            head = int(info_section(c, "persistence")["shoal_log_head_lsn"])
        assert int(link(primary)["shoal_sync_durable_lsn"]) >= head
        rep.kill_all()
        relay = relay_bytes(rep)
        missing = [k for k, v in values.items() if v.encode() not in relay]
        assert missing == []
        rep.start()
        online(primary)
        wait_for(lambda: re.search(r"partial resync from LSN (\d+)", rep.text()),
                 what="a partial resync", timeout=30)
        assert int(re.search(r"partial resync from LSN (\d+)", rep.text()).group(1)) >= head
        r = rep.client()
        assert r.mget(list(values)) == list(values.values())
        wait_for(lambda: _set_ok(p), what="a write at the disk level after the restart")
    finally:
        rep.stop()
        primary.stop()


def test_disk_level_refuses_writes_without_a_replica_that_has_a_dir(tmp_path):
    """A replica without `--dir` never acknowledges on disk, so it does not
    count toward the disk level: writes get NOREPLICAS (reads go on); back
    at the memory level it counts again. A bad level is refused."""
    primary = DurableServer(tmp_path / "primary").start()
    rep = Server(workers=1, extra_args=["--replicaof", f"127.0.0.1:{primary.port}"])
    try:
        rep.start()
        online(primary)
        p = primary.client()
        with pytest.raises(redis.exceptions.ResponseError, match="^CONFIG SET failed"):
            p.config_set("replica-sync-level", "fsynced")
        assert p.config_get("replica-sync-level") == {"replica-sync-level": "memory"}
        assert p.config_set("replica-sync-count", 1) is True
        assert p.set("k", "v") is True
        assert p.config_set("replica-sync-level", "disk") is True
        def refused():
            try:
                return p.set("probe", 1) and False
            except redis.exceptions.ResponseError as e:
                return str(e).startswith("NOREPLICAS")

        wait_for(refused, what="the disk level to take effect")
        with pytest.raises(redis.exceptions.ResponseError, match="^NOREPLICAS Not enough good replicas to write.$"):
            p.set("k", "w")
        assert p.get("k") == "v"
        assert p.config_set("replica-sync-level", "memory") is True
        wait_for(lambda: _set_ok(p), what="writes at the memory level")
        assert rep.client().get("k") == "w"
    finally:
        rep.stop()
        primary.stop()


def test_failover_waits_for_a_write_that_passed_its_checks(tmp_path):
    """FAILOVER's write gate: a SET held (SHOAL_TEST_WRITE_STALL) after its
    role and pause checks, before it runs, keeps the failover from fixing
    the target's position until it has run; then the write is on the new
    primary, not lost on the old one."""
    gate = tmp_path / "stall"
    primary, rep = pair(tmp_path, primary_env={"SHOAL_TEST_WRITE_STALL": str(gate)})
    try:
        rep.start()
        online(primary)
        control = raw_on_worker(primary, 1)
        writer = raw_on_worker(primary, 0)
        assert control.cmd("SET", "before", "1") == "OK"
        gate.write_text("")
        writer.send(b"*3\r\n$3\r\nSET\r\n$7\r\nstalled\r\n$1\r\n1\r\n")
        time.sleep(0.2)  # the SET reaches its stall
        assert control.cmd("FAILOVER", "TO", "127.0.0.1", str(rep.port)) == "OK"
        wait_for(lambda: info_section(control, "replication")["master_failover_state"] == "failover-in-progress",
                 timeout=30, what="the failover to begin")
        # Without the gate the hand-over would finish meanwhile (the
        # target's position fixed before the held write) and the write
        # would then land on a server that is no longer the primary.
        for _ in range(30):
            assert link(rep)["role"] == "slave"
            time.sleep(0.1)
        gate.unlink()
        assert writer.reply() == "OK"
        wait_for(lambda: link(rep)["role"] == "master", timeout=60, what="the replica to take over")
        assert rep.client().get("stalled") == "1"
        assert rep.client().get("before") == "1"
        control.close()
        writer.close()
    finally:
        if gate.exists():
            gate.unlink()
        rep.stop()
        primary.stop()


def test_replica_serve_stale_data_no_answers_masterdown_while_the_link_is_down(tmp_path):
    """`replica-serve-stale-data no`: with the link up the replica serves
    reads; with its primary gone it answers Redis's MASTERDOWN to commands
    without the STALE flag (GET, PING, a transaction holding GET) and
    serves those with it (INFO, ROLE, CONFIG GET)."""
    primary, rep = pair(tmp_path)
    try:
        rep.start()
        online(primary)
        assert rep.client().config_set("replica-serve-stale-data", "no") is True
        primary.client().set("k", "v")
        assert primary.client().execute_command("WAIT", 1, 10000) == 1
        r = rep.client()
        assert r.get("k") == "v"
        primary.stop()
        wait_for(lambda: link(rep)["master_link_status"] == "down", what="the link to drop")
        masterdown = "^MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.$"
        wait_for(lambda: _masterdown(r), what="MASTERDOWN")
        with pytest.raises(redis.exceptions.ResponseError, match=masterdown):
            r.ping()
        assert r.execute_command("ROLE")[0] == "slave"
        assert r.config_get("replica-serve-stale-data") == {"replica-serve-stale-data": "no"}
        assert "role" in r.info("replication")
        with Raw(rep.port) as c:
            assert c.cmd("MULTI") == "OK"
            assert str(c.cmd("GET", "k")).startswith("MASTERDOWN")
            assert str(c.cmd("EXEC")).startswith("EXECABORT")
        assert r.config_set("replica-serve-stale-data", "yes") is True
        wait_for(lambda: _get_ok(r), what="stale reads again")
    finally:
        rep.stop()
        primary.stop()


def _masterdown(r):
    try:
        r.get("k")
        return False
    except redis.exceptions.ResponseError as e:
        return str(e).startswith("MASTERDOWN")


def _get_ok(r):
    try:
        return r.get("k") == "v"
    except redis.exceptions.ResponseError:
        return False
