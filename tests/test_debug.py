"""DEBUG SLEEP and DEBUG HELP: Redis 7.0's replies and errors, and the sleep
stopping the worker that runs it (every client of that worker waits, as every
client of a Redis server does) while the other workers go on serving.

Redis 7.0 refuses DEBUG unless started with `enable-debug-command`, so with
SHOAL_TEST_TARGET=redis these tests start their own redis-server with it."""

import select
import subprocess
import time

import pytest

from shoaltest import TARGET, Err, Raw, encode, free_port, wait_for


class DebugRedis:
    """A redis-server 7.0 that accepts DEBUG."""

    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--enable-debug-command", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        wait_for(self._up, what="redis-server")

    def _up(self):
        try:
            Raw(self.port).close()
            return True
        except OSError:
            return False

    def raw(self):
        return Raw(self.port)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(15)


@pytest.fixture(scope="module")
def dbg(request):
    """A server that accepts DEBUG: the shared shoal server, or a Redis
    started with enable-debug-command."""
    if TARGET != "redis":
        yield request.getfixturevalue("server")
        return
    s = DebugRedis()
    yield s
    s.stop()


def syntax_error(sub):
    return Err(f"ERR unknown subcommand or wrong number of arguments for '{sub}'. "
               "Try DEBUG HELP.")


def test_sleep_replies_ok(dbg):
    with dbg.raw() as c:
        assert c.cmd("DEBUG", "SLEEP", "0") == "OK"
        assert c.cmd("debug", "sleep", "0.01") == "OK"
        assert c.cmd("PING") == "PONG"


def test_help_lists_sleep_in_redis_format(dbg):
    with dbg.raw() as c:
        lines = c.cmd("DEBUG", "HELP")
    assert lines[0] == "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    i = lines.index("SLEEP <seconds>")
    assert lines[i + 1] == "    Stop the server for <seconds>. Decimals allowed."
    assert lines[-2:] == ["HELP", "    Prints this help."]


def test_unknown_subcommand_and_wrong_counts_are_redis_errors(dbg):
    with dbg.raw() as c:
        assert c.cmd("DEBUG") == Err("ERR wrong number of arguments for 'debug' command")
        assert c.cmd("DEBUG", "nosuch") == syntax_error("nosuch")
        assert c.cmd("DEBUG", "sleep") == syntax_error("sleep")
        assert c.cmd("DEBUG", "SLEEP", "1", "2") == syntax_error("SLEEP")
        assert c.cmd("DEBUG", "HELP", "x") == syntax_error("HELP")


def test_command_info_has_redis_flags(dbg):
    with dbg.raw() as c:
        [info] = c.cmd("COMMAND", "INFO", "debug")
    assert info[:6] == [b"debug", -2, ["admin", "noscript", "loading", "stale"], 0, 0, 0]


def test_sleep_holds_back_other_clients_of_the_worker(dbg):
    """The second client's PING is answered only after the sleep: its worker
    (a one-worker server) is stopped, like a Redis server."""
    with dbg.raw() as a, dbg.raw() as b:
        assert b.cmd("PING") == "PONG"
        a.send(encode("DEBUG", "SLEEP", "1"))
        # Not a measurement: gives the server time to start the sleep before
        # the PING is sent.
        time.sleep(0.3)
        b.send(encode("PING"))
        ready, _, _ = select.select([a.sock, b.sock], [], [], 30)
        assert a.sock in ready
        assert a.reply() == "OK"
        assert b.reply() == "PONG"


@pytest.mark.shoal_only
def test_sleep_stops_only_its_own_worker(make_server, conns):
    s = make_server(workers=2)
    a, b = conns(s, 0), conns(s, 1)
    a.send(encode("DEBUG", "SLEEP", "3"))
    time.sleep(0.3)
    assert b.cmd("SET", "k", "v") == "OK"
    assert b.cmd("GET", "k") == b"v"
    ready, _, _ = select.select([a.sock], [], [], 0)
    assert not ready, "worker 0 answered during its sleep"
    assert a.reply() == "OK"


@pytest.mark.shoal_only
@pytest.mark.parametrize("arg", ["x", "", "nan", "1s"])
def test_sleep_refuses_a_non_number(dbg, arg):
    # Redis reads it with an unchecked strtod and sleeps 0 s.
    with dbg.raw() as c:
        assert c.cmd("DEBUG", "SLEEP", arg) == Err("ERR value is not a valid float")


@pytest.mark.shoal_only
@pytest.mark.parametrize("arg", ["-1", "3601", "inf"])
def test_sleep_refuses_a_pause_out_of_range(dbg, arg):
    with dbg.raw() as c:
        assert c.cmd("DEBUG", "SLEEP", arg) == Err(
            "ERR DEBUG SLEEP takes between 0 and 3600 seconds")


@pytest.mark.shoal_only
def test_sleep_is_refused_inside_exec(dbg):
    """EXEC runs its queue while every other worker waits: a sleep there
    would stop them all."""
    with dbg.raw() as c:
        assert c.cmd("MULTI") == "OK"
        assert c.cmd("DEBUG", "SLEEP", "0") == "QUEUED"
        assert c.cmd("PING") == "QUEUED"
        [err, pong] = c.cmd("EXEC")
        assert isinstance(err, Err) and "inside MULTI/EXEC" in err
        assert pong == "PONG"
