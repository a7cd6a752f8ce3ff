"""CLIENT PAUSE and CLIENT UNPAUSE across worker processes (`--workers 2`):
a pause set through one worker holds the other worker's clients at once;
their commands wait unanswered (INFO's blocked_clients counts them, over
every worker) while reads go on; CLIENT UNPAUSE through either worker lets
them run, in order and with the rest of their pipeline; a pause also ends
by its timeout. Nothing here measures time: a held client is shown to be
held by INFO and by the reply it gets later."""

import pytest

from shoaltest import Err, wait_for


@pytest.fixture
def two(make_server):
    return make_server(workers=2)


def blocked(c):
    info = c.cmd("INFO", "clients").decode()
    for line in info.split("\r\n"):
        if line.startswith("blocked_clients:"):
            return int(line.split(":")[1])
    raise AssertionError(info)


def test_errors_are_redis_s(server, raw):
    assert raw.cmd("CLIENT", "PAUSE", "abc") == Err("ERR timeout is not an integer or out of range")
    assert raw.cmd("CLIENT", "PAUSE", "-1") == Err("ERR timeout is negative")
    assert raw.cmd("CLIENT", "PAUSE", "10", "NONE") == Err("ERR CLIENT PAUSE mode must be WRITE or ALL")
    assert raw.cmd("CLIENT", "PAUSE") == Err("ERR wrong number of arguments for 'client|pause' command")
    assert raw.cmd("CLIENT", "UNPAUSE") == "OK"


@pytest.mark.shoal_only
def test_a_write_pause_holds_the_other_worker_s_writes_until_unpause(two, conns):
    ctl = conns(two, 0)
    other = conns(two, 1)
    reader = conns(two, 1)
    assert ctl.cmd("SET", "k", "old") == "OK"
    assert ctl.cmd("CLIENT", "PAUSE", "100000", "WRITE") == "OK"
    # A write and the read after it, pipelined: both wait.
    other.send(b"".join([
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nnew\r\n",
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    ]))
    wait_for(lambda: blocked(ctl) == 1, what="the SET held")
    # Reads on either worker go on and see the old value.
    assert reader.cmd("GET", "k") == b"old"
    assert ctl.cmd("GET", "k") == b"old"
    assert ctl.cmd("CLIENT", "UNPAUSE") == "OK"
    assert other.reply() == "OK"
    assert other.reply() == b"new"
    wait_for(lambda: blocked(ctl) == 0, what="no client held")


@pytest.mark.shoal_only
def test_unpause_through_either_worker_releases_every_held_client(two, conns):
    ctl = conns(two, 1)
    held = [conns(two, 0), conns(two, 1), conns(two, 0)]
    assert ctl.cmd("CLIENT", "PAUSE", "100000", "WRITE") == "OK"
    for i, c in enumerate(held):
        c.send(b"*3\r\n$5\r\nRPUSH\r\n$1\r\nq\r\n$1\r\n%d\r\n" % i)
        wait_for(lambda n=i + 1: blocked(ctl) == n, what=f"{i + 1} held")
    # The mirror of the first test: the pause was set through worker 1, the
    # unpause goes through worker 0.
    assert conns(two, 0).cmd("CLIENT", "UNPAUSE") == "OK"
    assert sorted(c.reply() for c in held) == [1, 2, 3]
    assert ctl.cmd("LLEN", "q") == 3


@pytest.mark.shoal_only
def test_a_pause_ends_by_its_timeout_on_every_worker(two, conns):
    ctl = conns(two, 0)
    c = conns(two, 1)
    assert ctl.cmd("CLIENT", "PAUSE", "300", "ALL") == "OK"
    # Held (ALL holds reads too) until the deadline, then answered.
    assert c.cmd("PING") == "PONG"
    assert c.cmd("SET", "k", "v") == "OK"
    assert ctl.cmd("GET", "k") == b"v"


@pytest.mark.shoal_only
def test_a_pause_keeps_expired_keys_in_place(two, conns):
    ctl = conns(two, 0)
    other = conns(two, 1)
    assert ctl.cmd("CONFIG", "RESETSTAT") == "OK"

    def expired():
        info = ctl.cmd("INFO", "stats").decode()
        return int(info.split("expired_keys:")[1].split("\r\n")[0])

    # The pause starts inside a transaction, after its write (as Redis's
    # suite does).
    ctl.cmd("MULTI")
    ctl.cmd("SET", "a", "1", "PX", "1")
    ctl.cmd("CLIENT", "PAUSE", "100000", "WRITE")
    assert ctl.cmd("EXEC") == ["OK", "OK"]
    wait_for(lambda: other.cmd("GET", "a") is None, what="a logically expired")
    assert expired() == 0
    assert ctl.cmd("CLIENT", "UNPAUSE") == "OK"
    assert other.cmd("GET", "a") is None
    wait_for(lambda: expired() == 1, what="a removed")


@pytest.mark.shoal_only
def test_a_write_pause_holds_scripts_by_their_declared_flags(two, conns):
    ctl = conns(two, 0)
    other = conns(two, 1)
    assert ctl.cmd("SET", "x", "y") == "OK"
    assert ctl.cmd(
        "FUNCTION", "LOAD", "REPLACE",
        "#!lua name=pauselib\n"
        "redis.register_function{function_name='ro_f', callback=function() return 'ro' end, flags={'no-writes'}}\n"
        "redis.register_function{function_name='rw_f', callback=function() return 'rw' end}",
    ) == b"pauselib"
    assert ctl.cmd("CLIENT", "PAUSE", "100000", "WRITE") == "OK"
    # Scripts that declare no-writes run at once on the other worker.
    assert other.cmd("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", "x") == b"y"
    sha = other.cmd("SCRIPT", "LOAD", "#!lua flags=no-writes\nreturn 2")
    assert other.cmd("EVALSHA", sha, "0") == 2
    assert other.cmd("FCALL", "ro_f", "0") == b"ro"
    # A transaction of no-writes scripts is not held either.
    assert other.cmd("MULTI") == "OK"
    assert other.cmd("EVAL", "#!lua flags=no-writes\nreturn 12", "0") == "QUEUED"
    assert other.cmd("EXEC") == [12]
    # A function that may write, and a script without a shebang, wait.
    held = conns(two, 1)
    held.send(b"*3\r\n$5\r\nFCALL\r\n$4\r\nrw_f\r\n$1\r\n0\r\n")
    wait_for(lambda: blocked(ctl) == 1, what="FCALL rw_f held")
    held2 = conns(two, 1)
    held2.send(b"*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\n")
    wait_for(lambda: blocked(ctl) == 2, what="EVAL held")
    assert ctl.cmd("CLIENT", "UNPAUSE") == "OK"
    assert held.reply() == b"rw"
    assert held2.reply() == 1


def test_read_only_scripts_may_not_publish(server, raw):
    for args in (("EVAL_RO", "return redis.call('publish', 'ch', 'm')", "0"),
                 ("EVAL", "#!lua flags=no-writes\nreturn redis.call('publish', 'ch', 'm')", "0")):
        reply = raw.cmd(*args)
        assert isinstance(reply, Err)
        assert reply.startswith("ERR Write commands are not allowed from read-only scripts.")
    assert raw.cmd("EVAL", "return redis.call('publish', 'ch', 'm')", "0") == 0
