"""Lua scripts and functions across worker processes (`--workers 2`): a
script loaded through one worker runs by EVALSHA through the other, a
function library loaded through one is called and deleted through the
other, redis-py's `Lock` (whose methods are Lua scripts) works between
clients of different workers, and a read-modify-write script stays atomic
while clients of both workers run it at once.

These are shoal's own (Redis has one process); what they expect is Redis's
semantics all the same."""

import os
import re
import signal
import subprocess
import threading

import pytest
import redis

from shoaltest import SHOAL_BIN, Err, encode, raw_on_worker, wait_for, worker_slot_pids
from test_workers import worker_of

pytestmark = pytest.mark.shoal_only


@pytest.fixture
def two(make_server):
    return make_server(workers=2, memory="128m")


def client_on_worker(server, slot, tries=400):
    """A redis-py client whose one connection SO_REUSEPORT gave to `slot`."""
    # The misses stay open until the end (as test_workers' helper does), so
    # that each try is a new connection the kernel places afresh.
    spare = []
    try:
        for _ in range(tries):
            c = server.client(single_connection_client=True)
            info = c.execute_command("CLIENT", "INFO")
            m = re.search(r"(?:^| )worker=(\d+)", info)
            if m and int(m.group(1)) == slot:
                return c
            spare.append(c)
    finally:
        for c in spare:
            c.close()
    raise AssertionError(f"no client reached worker {slot}")


def test_evalsha_across_workers(two, conns):
    a = raw_on_worker(two, 0)
    b = raw_on_worker(two, 1)
    try:
        sha = a.cmd("SCRIPT", "LOAD", "return {KEYS[1], ARGV[1], redis.call('incr', KEYS[1])}")
        assert isinstance(sha, bytes) and len(sha) == 40
        assert b.cmd("SCRIPT", "EXISTS", sha, "0" * 40) == [1, 0]
        assert b.cmd("EVALSHA", sha, "1", "k", "v") == [b"k", b"v", 1]
        assert a.cmd("EVALSHA", sha, "1", "k", "v") == [b"k", b"v", 2]
        # EVAL caches its script for every worker too.
        assert a.cmd("EVAL", "return 'eval'", "0") == b"eval"
        body_sha = b.cmd("SCRIPT", "LOAD", "return 'eval'")
        assert a.cmd("EVALSHA", body_sha, "0") == b"eval"
        assert b.cmd("SCRIPT", "FLUSH") == "OK"
        err = a.cmd("EVALSHA", sha, "1", "k", "v")
        assert isinstance(err, Err) and str(err).startswith("NOSCRIPT")
    finally:
        a.close()
        b.close()


def test_functions_across_workers(two):
    a = raw_on_worker(two, 0)
    b = raw_on_worker(two, 1)
    try:
        code = ("#!lua name=counters\n"
                "redis.register_function('bump', function(keys, args) "
                "return redis.call('incrby', keys[1], args[1]) end)\n"
                "redis.register_function{function_name='peek', flags={'no-writes'}, "
                "callback=function(keys) return redis.call('get', keys[1]) end}")
        assert a.cmd("FUNCTION", "LOAD", code) == b"counters"
        assert b.cmd("FCALL", "bump", "1", "n", "5") == 5
        assert a.cmd("FCALL_RO", "peek", "1", "n") == b"5"
        err = b.cmd("FCALL_RO", "bump", "1", "n", "1")
        assert isinstance(err, Err) and "write flag" in str(err)
        listed = b.cmd("FUNCTION", "LIST")
        assert listed[0][1] == b"counters"
        payload = a.cmd("FUNCTION", "DUMP")
        assert b.cmd("FUNCTION", "DELETE", "counters") == "OK"
        err = a.cmd("FCALL", "bump", "1", "n", "1")
        assert isinstance(err, Err) and "Function not found" in str(err)
        assert a.cmd("FUNCTION", "RESTORE", payload) == "OK"
        assert b.cmd("FCALL", "bump", "1", "n", "1") == 6
    finally:
        a.close()
        b.close()


def test_redis_py_lock_across_workers(two):
    a = client_on_worker(two, 0)
    b = client_on_worker(two, 1)
    try:
        lock_a = a.lock("resource", timeout=10, thread_local=False)
        lock_b = b.lock("resource", timeout=10)
        assert lock_a.acquire(blocking=False)
        assert not lock_b.acquire(blocking=False)
        assert lock_a.owned() and not lock_b.owned()
        assert lock_a.extend(5)
        assert b.pttl("resource") > 10_000
        assert lock_a.reacquire()
        assert b.pttl("resource") <= 10_000
        with pytest.raises(redis.exceptions.LockError):
            lock_b.release()  # never acquired
        # A token that is not the holder's cannot release or extend it.
        intruder = b.lock("resource", timeout=10)
        intruder.local.token = b"not-the-owner"
        with pytest.raises(redis.exceptions.LockNotOwnedError):
            intruder.release()
        # B blocks until A releases from another thread.
        released = threading.Event()

        def release_later():
            released.wait()
            lock_a.release()

        t = threading.Thread(target=release_later)
        t.start()
        released.set()
        assert lock_b.acquire(blocking=True, blocking_timeout=10)
        t.join()
        assert lock_b.owned()
        lock_b.release()
        assert a.exists("resource") == 0
    finally:
        a.close()
        b.close()


def test_script_is_atomic_across_workers(two):
    """GET then SET inside a script: a lost update would show as a total
    below the number of runs."""
    script = "local v = tonumber(redis.call('get', KEYS[1]) or '0') redis.call('set', KEYS[1], v + 1) return v + 1"
    runs = 300

    def run(slot):
        c = client_on_worker(two, slot)
        try:
            f = c.register_script(script)
            for _ in range(runs):
                f(keys=["total"])
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(s,)) for s in (0, 1, 0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    c = two.client()
    assert c.get("total") == str(4 * runs)
    c.close()


def test_script_errors_leave_the_worker_serving(two):
    c = raw_on_worker(two, 0)
    try:
        err = c.cmd("EVAL", "return redis.call('nosuchcommand')", "0")
        assert str(err).startswith("ERR Unknown Redis command called from script")
        err = c.cmd("EVAL", "return 1 +", "0")
        assert str(err).startswith("ERR Error compiling script (new function): user_script:1:")
        err = c.cmd("EVAL", "return 1", "2", "a")
        assert str(err) == "ERR Number of keys can't be greater than number of args"
        err = c.cmd("EVAL", "return redis.call('multi')", "0")
        assert "This Redis command is not allowed from script" in str(err)
        assert c.cmd("EVAL", "return cjson.encode({1, 'a', {x = true}})", "0") == b'[1,"a",{"x":true}]'
        assert c.cmd("PING") == "PONG"
    finally:
        c.close()


# Busy scripts: past busy-reply-threshold every other client, on either
# worker, gets -BUSY; SCRIPT KILL / FUNCTION KILL stop a script that has not
# written, from any worker.
BUSY_EVAL = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
BUSY_FUNCTION = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
UNKILLABLE = ("UNKILLABLE Sorry the script already executed write commands against the dataset. "
              "You can either wait the script termination or kill the server in a hard way "
              "using the SHUTDOWN NOSAVE command.")


def until_busy(c, expected=BUSY_EVAL, tries=2000):
    """Sends PING until the running script is past the threshold (before
    it, the command waits for the script and then runs it, as in Redis)."""
    for _ in range(tries):
        r = c.cmd("PING")
        if isinstance(r, Err):
            assert str(r) == expected
            return
    raise AssertionError("the script never turned busy")


def test_busy_script_answers_both_workers_and_is_killed_from_either(two, conns):
    runner = conns(two, 0)
    same = conns(two, 0)
    other = conns(two, 1)
    assert other.cmd("CONFIG", "SET", "busy-reply-threshold", "50") == "OK"
    assert str(other.cmd("SCRIPT", "KILL")) == "NOTBUSY No scripts in execution right now."
    for killer, waiter in ((other, same), (same, other)):
        runner.send(encode("EVAL", "local i = 0 while true do i = i + 1 end", "0"))
        until_busy(killer)
        until_busy(waiter)
        assert str(waiter.cmd("GET", "k")) == BUSY_EVAL
        # MULTI is allowed while busy, the commands queued after it are
        # refused, and EXEC then aborts (Redis's processCommand).
        assert waiter.cmd("MULTI") == "OK"
        assert str(waiter.cmd("INCR", "k")) == BUSY_EVAL
        assert str(killer.cmd("FUNCTION", "KILL")) == BUSY_EVAL
        assert killer.cmd("SCRIPT", "KILL") == "OK"
        err = str(runner.reply())
        assert err.startswith("ERR Script killed by user with SCRIPT KILL...")
        assert str(waiter.cmd("EXEC")).startswith("EXECABORT")
        assert waiter.cmd("GET", "k") is None
        assert killer.cmd("PING") == "PONG"


def test_pcall_cannot_catch_script_kill(two, conns):
    runner = conns(two, 0)
    other = conns(two, 1)
    assert other.cmd("CONFIG", "SET", "lua-time-limit", "50") == "OK"
    runner.send(encode(
        "EVAL",
        "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
        "0"))
    until_busy(other)
    assert other.cmd("SCRIPT", "KILL") == "OK"
    assert "killed by user" in str(runner.reply())
    assert runner.cmd("PING") == "PONG"


def test_function_kill_and_script_kill_name_their_kind(two, conns):
    runner = conns(two, 0)
    other = conns(two, 1)
    code = ("#!lua name=spin\n"
            "redis.register_function{function_name='spin', flags={'no-writes'}, "
            "callback=function() while true do end end}")
    assert other.cmd("FUNCTION", "LOAD", code) == b"spin"
    assert other.cmd("CONFIG", "SET", "busy-reply-threshold", "50") == "OK"
    runner.send(encode("FCALL", "spin", "0"))
    until_busy(other, BUSY_FUNCTION)
    assert str(other.cmd("SCRIPT", "KILL")) == BUSY_FUNCTION
    assert other.cmd("FUNCTION", "KILL") == "OK"
    assert "killed by user" in str(runner.reply())
    assert other.cmd("PING") == "PONG"


def test_a_script_that_wrote_is_unkillable_until_shutdown_nosave(make_server):
    server = make_server(workers=2, memory="128m")
    runner = raw_on_worker(server, 0)
    other = raw_on_worker(server, 1)
    try:
        assert other.cmd("CONFIG", "SET", "busy-reply-threshold", "50") == "OK"
        runner.send(encode("EVAL", "redis.call('set', KEYS[1], 'x') while true do end", "1", "w"))
        until_busy(other)
        assert str(other.cmd("SCRIPT", "KILL")) == UNKILLABLE
        assert str(other.cmd("FUNCTION", "KILL")) == UNKILLABLE
        # SHUTDOWN without NOSAVE is refused while busy; NOSAVE stops it all.
        assert str(other.cmd("SHUTDOWN")) == BUSY_EVAL
        other.send(encode("SHUTDOWN", "NOSAVE"))
        server.proc.wait(30)
        assert server.proc.returncode is not None
    finally:
        runner.close()
        other.close()


def test_function_stats_shows_a_busy_function_on_every_worker(two, conns):
    runner = conns(two, 0)
    same = conns(two, 0)
    other = conns(two, 1)
    code = ("#!lua name=spin\n"
            "redis.register_function{function_name='spin', flags={'no-writes'}, "
            "callback=function() while true do end end}")
    assert other.cmd("FUNCTION", "LOAD", code) == b"spin"
    assert other.cmd("CONFIG", "SET", "busy-reply-threshold", "50") == "OK"
    runner.send(encode("FCALL", "spin", "0", "arg"))
    until_busy(other, BUSY_FUNCTION)
    until_busy(same, BUSY_FUNCTION)
    for c in (other, same):
        stats = c.cmd("FUNCTION", "STATS")
        assert stats[0] == b"running_script"
        running = stats[1]
        assert running[0:4] == [b"name", b"spin", b"command", [b"fcall", b"spin", b"0", b"arg"]]
        assert running[4] == b"duration_ms" and running[5] >= 0
    assert other.cmd("FUNCTION", "KILL") == "OK"
    assert "killed by user" in str(runner.reply())
    assert other.cmd("FUNCTION", "STATS")[1] is None


def test_store_remove_takes_the_scripting_files(make_server):
    server = make_server(workers=1)
    c = server.raw()
    try:
        assert len(c.cmd("SCRIPT", "LOAD", "return 1")) == 40
        code = "#!lua name=lib\nredis.register_function('one', function() return 1 end)"
        assert c.cmd("FUNCTION", "LOAD", code) == b"lib"
    finally:
        c.close()
    segment = f"/dev/shm/{server.name}"
    assert os.path.isdir(segment + ".scripts") and os.path.exists(segment + ".functions")
    server.proc.terminate()
    server.proc.wait(30)
    out = subprocess.run([SHOAL_BIN, "store", "remove", "--name", server.name],
                         capture_output=True, text=True, check=True)
    assert "removed" in out.stdout
    for path in (segment, segment + ".scripts", segment + ".functions"):
        assert not os.path.exists(path)


def test_an_orphaned_worker_ends_its_busy_script(make_server):
    """A worker whose supervisor died does not spin on in a script nobody
    can kill: its hook ends the script, and the worker exits."""
    server = make_server(workers=2, memory="128m")
    runner = raw_on_worker(server, 0)
    other = raw_on_worker(server, 1)
    try:
        workers = server.worker_pids()
        assert len(workers) == 2
        assert other.cmd("CONFIG", "SET", "busy-reply-threshold", "50") == "OK"
        runner.send(encode("EVAL", "while true do end", "0"))
        until_busy(other)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(10)
        assert "killed" in str(runner.reply())
        wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in workers),
                 timeout=30, what="the orphaned workers to exit")
    finally:
        runner.close()
        other.close()


def test_a_worker_killed_mid_script_leaves_the_store_as_before_it(make_server):
    """A worker SIGKILLed in the middle of a script that already wrote
    leaves the store as before the script (it cannot have finished): the
    script is one step of the store, as MULTI/EXEC is."""
    server = make_server(workers=2, memory="128m")
    runner = raw_on_worker(server, 0)
    other = raw_on_worker(server, 1)
    try:
        assert other.cmd("SET", "before", "1") == "OK"
        assert other.cmd("CONFIG", "SET", "busy-reply-threshold", "50") == "OK"
        script = ("for i = 1, 500 do redis.call('SET', 'k' .. i, i) end "
                  "for i = 1, 1000000000 do redis.call('INCR', 'n') end")
        runner.send(encode("EVAL", script, "0"))
        until_busy(other)
        os.kill(worker_slot_pids(server)[0], signal.SIGKILL)
        runner.close()
        wait_for(lambda: not isinstance(other.cmd("PING"), Err), timeout=30,
                 what="the other worker to serve again")
        assert other.cmd("GET", "before") == b"1"
        assert other.cmd("SET", "after", "1") == "OK"
        present = sum(other.cmd("EXISTS", f"k{i}") for i in range(1, 501))
        assert (present, other.cmd("GET", "n")) == (0, None)
    finally:
        runner.close()
        other.close()


def stat_line(c, section, name):
    """INFO `section`'s line for `name` (e.g. cmdstat_set), or None."""
    info = c.cmd("INFO", section).decode()
    for line in info.split("\r\n"):
        if line.startswith(name + ":"):
            return line.split(":", 1)[1]
    return None


def test_commands_a_script_calls_are_counted_as_redis_counts_them(two, conns):
    a = conns(two, 0)
    b = conns(two, 1)
    assert a.cmd("CONFIG", "RESETSTAT") == "OK"
    # A command error inside the script: counted once, under the command,
    # and the script's call fails without a second error count.
    err = a.cmd("EVAL", "redis.call('select', 99)", "0")
    assert str(err).startswith("ERR DB index is out of range script: ")
    assert str(err).endswith(", on @user_script:1.")
    assert stat_line(b, "commandstats", "cmdstat_select").startswith("calls=1,")
    assert stat_line(b, "commandstats", "cmdstat_select").endswith("rejected_calls=0,failed_calls=1")
    assert stat_line(b, "commandstats", "cmdstat_eval").endswith("rejected_calls=0,failed_calls=1")
    assert stat_line(b, "errorstats", "errorstat_ERR") == "count=1"
    # A command the script may not run is a rejected call of it.
    assert a.cmd("CONFIG", "RESETSTAT") == "OK"
    err = a.cmd("EVAL_RO", "return redis.call('set', KEYS[1], 'v')", "1", "k")
    assert str(err).startswith("ERR Write commands are not allowed from read-only scripts.")
    assert stat_line(b, "commandstats", "cmdstat_set").startswith("calls=0,")
    assert stat_line(b, "commandstats", "cmdstat_set").endswith("rejected_calls=1,failed_calls=0")
    assert stat_line(b, "errorstats", "errorstat_ERR") == "count=1"
    # An error the script makes itself is counted by its code.
    assert a.cmd("CONFIG", "RESETSTAT") == "OK"
    err = a.cmd("EVAL", "return redis.error_reply('MY_CODE custom')", "0")
    assert str(err) == "MY_CODE custom"
    assert stat_line(b, "errorstats", "errorstat_MY_CODE") == "count=1"
    assert stat_line(b, "commandstats", "cmdstat_eval").endswith("failed_calls=1")


def test_acl_check_cmd_answers_for_the_scripts_user(two, conns):
    admin = conns(two, 0)
    assert admin.cmd("ACL", "SETUSER", "bob", "on", ">pw", "+@scripting", "+set", "~x*") == "OK"
    c = conns(two, 1)
    assert c.cmd("AUTH", "bob", "pw") == "OK"
    assert c.cmd("EVAL", "return redis.acl_check_cmd('set', 'xx', 1)", "1", "xx") == 1
    assert c.cmd("EVAL", "return redis.acl_check_cmd('hset', 'xx', 'f', 1)", "1", "xx") is None
    assert c.cmd("EVAL", "return redis.acl_check_cmd('set', 'yy', 1)", "0") is None
    err = c.cmd("EVAL", "return redis.acl_check_cmd('nosuch', 'a')", "0")
    assert "Invalid command passed to redis.acl_check_cmd()" in str(err)
    # The default user may run anything.
    assert admin.cmd("EVAL", "return redis.acl_check_cmd('hset', 'k', 'f', 1)", "0") == 1


def test_what_scripts_may_not_do_and_the_cached_scripts_count(two, conns):
    c = conns(two, 0)
    other = conns(two, 1)
    assert str(c.cmd("CLUSTER", "INFO")) == "ERR This instance has cluster support disabled"
    err = c.cmd("EVAL", "return redis.call('cluster', 'reset', 'hard')", "0")
    assert "This Redis command is not allowed from script" in str(err)
    err = c.cmd("EVAL", "return redis.pcall('xread', 'BLOCK', 0, 'STREAMS', 's', '$')", "1", "s")
    assert str(err) == "ERR xread command is not allowed with BLOCK option from scripts"
    assert c.cmd("SADD", "set", "b", "aa", "a", "c") == 4
    assert c.cmd("EVAL", "return redis.call('sort', KEYS[1], 'by', '_')", "1", "set") == [
        b"a", b"aa", b"b", b"c"]
    assert c.cmd("SCRIPT", "FLUSH") == "OK"
    for i in range(3):
        c.cmd("SCRIPT", "LOAD", f"return {i}")
    assert "number_of_cached_scripts:3\r\n" in other.cmd("INFO", "memory").decode()
    assert c.cmd("SCRIPT", "FLUSH", "ASYNC") == "OK"
    assert "number_of_cached_scripts:0\r\n" in other.cmd("INFO", "memory").decode()


def test_a_script_that_allocates_without_bound_fails_and_the_next_ones_run(make_server):
    """A script past the Lua memory limit (256 MiB per worker) gets an
    error and leaves the worker serving; its garbage does not make the next
    scripts fail for want of memory."""
    server = make_server(workers=1, memory="64m")
    c = server.client()
    grow = "local t, s = {}, string.rep('x', 1048576) for i = 1, {n} do t[i] = s .. i end return #t"
    with pytest.raises(redis.ResponseError, match="not enough memory"):
        c.eval(grow.replace("{n}", "100000"), 0)
    for _ in range(3):
        assert c.eval(grow.replace("{n}", "100"), 0) == 100
    assert c.eval("return redis.call('ping')", 0) == "PONG"


def test_a_script_of_a_million_sadds_on_one_set_fits_the_default_segment(make_server):
    """A script grows one set by a million members in a segment of the
    default size (64m): the blocks each SADD replaces were allocated by the
    script itself, so they are freed at once, not kept for a rollback until
    the script ends (Redis's unit/latency-monitor does this)."""
    server = make_server()
    # A million calls take a while on a loaded machine.
    c = server.raw(timeout=300)
    try:
        script = "for i = 1, 1000000 do redis.call('SADD', KEYS[1], i) end return 1"
        assert c.cmd("EVAL", script, "1", "big") == 1
        assert c.cmd("SCARD", "big") == 1000000
        assert c.cmd("SISMEMBER", "big", "999999") == 1
    finally:
        c.close()
