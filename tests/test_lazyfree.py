"""Lazy free: UNLINK, FLUSHDB/FLUSHALL ASYNC and the `lazyfree-lazy-*`
settings detach a value whose free effort passes Redis's threshold (more
than 64 items) and the worker frees it after the reply. INFO's
`lazyfree_pending_objects` and `lazyfreed_objects` count them as Redis's
do, the memory comes back, and a worker SIGKILLed while it frees leaves a
store that checks clean (its recoverer frees the rest).

Inside MULTI/EXEC nothing runs between the commands, so INFO there sees
the value detached and not yet freed, whatever the timing. That is
shoal's: redis-server frees in a thread of its own, which may be done
before EXEC's INFO runs, and its FLUSHDB ASYNC counts every key of the old
keyspace as a lazily freed object (shoal frees the small ones in the
command), so these tests are shoal's only."""

import os
import signal
import subprocess

import pytest

from shoaltest import SHOAL_BIN, wait_for

pytestmark = pytest.mark.shoal_only


def memory(r):
    return r.info("memory")


def fill_set(r, key, n, batch=10_000):
    for start in range(0, n, batch):
        r.sadd(key, *range(start, min(start + batch, n)))


def settled(r):
    wait_for(lambda: memory(r)["lazyfree_pending_objects"] == 0, what="the background free")


def detached_in_exec(r, *command):
    """Runs `command` and INFO memory in one transaction: the figures right
    after it, before any background step."""
    p = r.pipeline(transaction=True)
    p.execute_command(*command)
    p.info("memory")
    return p.execute()


def test_unlink_detaches_a_large_value_and_frees_it_after_the_reply(r):
    settled(r)
    r.config_resetstat()
    before = memory(r)["used_memory"]
    fill_set(r, "big", 100_000)
    peak = memory(r)["used_memory"]
    assert peak > before + 1_000_000
    reply, info = detached_in_exec(r, "UNLINK", "big")
    assert reply == 1
    assert info["lazyfree_pending_objects"] == 1
    assert info["used_memory"] > before + 1_000_000
    assert r.exists("big") == 0
    settled(r)
    after = memory(r)
    assert after["lazyfreed_objects"] == 1
    assert after["used_memory"] < before + (peak - before) // 10


def test_small_values_and_del_free_at_once(r):
    settled(r)
    r.config_resetstat()
    fill_set(r, "few", 64)
    fill_set(r, "big", 1000)
    _, info = detached_in_exec(r, "UNLINK", "few")
    assert info["lazyfree_pending_objects"] == 0
    # DEL frees in the command unless lazyfree-lazy-user-del says otherwise.
    _, info = detached_in_exec(r, "DEL", "big")
    assert info["lazyfree_pending_objects"] == 0
    assert memory(r)["lazyfreed_objects"] == 0
    try:
        r.config_set("lazyfree-lazy-user-del", "yes")
        fill_set(r, "big", 1000)
        _, info = detached_in_exec(r, "DEL", "big")
        assert info["lazyfree_pending_objects"] == 1
        wait_for(lambda: memory(r)["lazyfreed_objects"] == 1, what="the background free")
    finally:
        r.config_set("lazyfree-lazy-user-del", "no")


@pytest.mark.parametrize("command", [["FLUSHDB", "ASYNC"], ["FLUSHALL", "ASYNC"]])
def test_flush_async_detaches_large_values(r, command):
    settled(r)
    r.config_resetstat()
    fill_set(r, "a", 1000)
    r.rpush("b", *range(1000))
    r.hset("c", mapping={f"f{i}": i for i in range(1000)})
    r.set("s", "x")
    _, info = detached_in_exec(r, *command)
    assert info["lazyfree_pending_objects"] == 3
    assert r.dbsize() == 0
    settled(r)
    assert memory(r)["lazyfreed_objects"] == 3
    # SYNC, and no mode while lazyfree-lazy-user-flush is no, free at once.
    fill_set(r, "a", 1000)
    _, info = detached_in_exec(r, command[0], "SYNC")
    assert info["lazyfree_pending_objects"] == 0
    fill_set(r, "a", 1000)
    _, info = detached_in_exec(r, command[0])
    assert info["lazyfree_pending_objects"] == 0
    try:
        r.config_set("lazyfree-lazy-user-flush", "yes")
        fill_set(r, "a", 1000)
        _, info = detached_in_exec(r, command[0])
        assert info["lazyfree_pending_objects"] == 1
    finally:
        r.config_set("lazyfree-lazy-user-flush", "no")


def test_lazyfree_server_del_frees_an_overwritten_value_lazily(r):
    settled(r)
    r.config_resetstat()
    try:
        r.config_set("lazyfree-lazy-server-del", "yes")
        fill_set(r, "big", 1000)
        _, info = detached_in_exec(r, "SET", "big", "now a string")
        assert info["lazyfree_pending_objects"] == 1
        wait_for(lambda: memory(r)["lazyfreed_objects"] == 1, what="the background free")
    finally:
        r.config_set("lazyfree-lazy-server-del", "no")


def test_lazyfree_lazy_expire_frees_an_expired_value_lazily(r):
    settled(r)
    r.config_resetstat()
    try:
        r.config_set("lazyfree-lazy-expire", "yes")
        fill_set(r, "big", 1000)
        r.pexpire("big", 1)
        wait_for(lambda: r.exists("big") == 0, what="the expiry")
        wait_for(lambda: memory(r)["lazyfreed_objects"] == 1, what="the background free")
        assert r.info("stats")["expired_keys"] == 1
    finally:
        r.config_set("lazyfree-lazy-expire", "no")


def test_eviction_frees_at_once_whatever_lazyfree_lazy_eviction_says(r):
    settled(r)
    r.config_resetstat()
    fill_set(r, "big", 5000)
    used = memory(r)["used_memory_dataset"]
    try:
        r.config_set("lazyfree-lazy-eviction", "yes")
        r.config_set("maxmemory-policy", "allkeys-lru")
        r.config_set("maxmemory", str(used // 2))
        r.set("small", "x")
        assert r.exists("big") == 0
        assert r.get("small") == "x"
        info = memory(r)
        assert info["lazyfree_pending_objects"] == 0
        assert info["lazyfreed_objects"] == 0
    finally:
        r.config_set("maxmemory", "0")
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("lazyfree-lazy-eviction", "no")


def test_sigkill_during_the_background_free_leaves_a_clean_store(make_server):
    s = make_server(workers=1, memory="256m")
    r = s.client()
    fill_set(r, "big", 400_000)
    fill_set(r, "keep", 1000)
    worker = s.worker_pids()[0]
    assert r.unlink("big") == 1
    # The free takes many steps: the kill lands while it runs (or, at
    # worst, after it; either way nothing may leak).
    os.kill(worker, signal.SIGKILL)
    r.close()
    wait_for(lambda: any(pid != worker for pid in s.worker_pids()),
             timeout=30, what="a new worker")
    r = s.client()
    wait_for(lambda: _answers(r), timeout=30, what="the new worker")
    assert memory(r)["lazyfree_pending_objects"] == 0
    assert r.scard("keep") == 1000
    r.close()
    # Stop the server but keep its segment, then check every invariant.
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(15)
    out = subprocess.run([SHOAL_BIN, "store", "--name", s.name, "check"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    s.proc = None
    s.remove_segment()


def _answers(r):
    try:
        return r.ping()
    except Exception:
        return False
