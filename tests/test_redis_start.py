"""`shoal serve` started the way redis-server starts: a redis.conf-style file
as the first argument, `--name value` options for any Redis parameter, the
start lines tools written for Redis wait for (` PID: <pid>`, `Ready to
accept connections`, `Failed listening on port`) and redis-server's FATAL
CONFIG FILE ERROR on a bad directive. With SHOAL_TEST_TARGET=redis the same
command lines run redis-server itself."""

import os
import re
import socket
import subprocess
import threading
import time

from shoaltest import SHOAL_BIN, TARGET, Err, free_port, remove_segment_files, wait_for


def server_argv(*args):
    if TARGET == "redis":
        return ["redis-server", *args]
    return [SHOAL_BIN, "serve", *args, "--workers", "1", "--memory", "64m"]


class Started:
    """A server started from `argv`; its stdout lines are collected."""

    def __init__(self, argv, cwd):
        self.lines = []
        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line.decode(errors="replace").rstrip("\n"))

    def text(self):
        return "\n".join(self.lines)

    def wait_ready(self):
        wait_for(lambda: "Ready to accept connections" in self.text()
                 or self.proc.poll() is not None, timeout=20, what="ready line")
        assert self.proc.poll() is None, self.text()

    def segment(self):
        m = re.search(r"segment (/dev/shm/\S+) \(", self.text())
        return m and m.group(1)

    def stop(self):
        segment = self.segment()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)
        if segment:
            remove_segment_files(segment)


def command(port, *args):
    """One RESP command; the reply as redis-cli would print it, in lines."""
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                         text=True, timeout=10)
    return out.stdout.splitlines()


def test_start_from_a_config_file(tmp_path):
    port = free_port()
    conf = tmp_path / "redis.conf"
    conf.write_text(
        "# written by the test\n"
        "always-show-logo yes\n"
        f"port {port}\n"
        "bind 127.0.0.1\n"
        "logfile ''\n"
        f"dir \"{tmp_path}\"\n"
        "pidfile server.pid\n"
        "save 900 1\n"
        "maxmemory 3mb\n"
        "notify-keyspace-events KEA\n"
        "timeout 7\n"
        "latency-monitor-threshold 1   \n"
        "\n"
        "enable-debug-command yes\n"
    )
    s = Started(server_argv(str(conf)), cwd="/")
    try:
        s.wait_ready()
        assert f" PID: {s.proc.pid}" in s.text()
        assert command(port, "PING") == ["PONG"]
        assert command(port, "CONFIG", "GET", "maxmemory") == ["maxmemory", str(3 << 20)]
        assert command(port, "CONFIG", "GET", "save") == ["save", "900 1"]
        assert command(port, "CONFIG", "GET", "timeout") == ["timeout", "7"]
        assert command(port, "CONFIG", "GET", "notify-keyspace-events")[1] == "AKE"
        assert command(port, "CONFIG", "GET", "latency-monitor-threshold")[1] == "1"
        assert command(port, "CONFIG", "GET", "dir") == ["dir", str(tmp_path)]
        # The working directory is `dir`: the pid file is written there.
        assert (tmp_path / "server.pid").read_text().strip() == str(s.proc.pid)
        if TARGET == "shoal":
            assert s.segment().startswith(f"/dev/shm/shoal-{port}-")
    finally:
        s.stop()
    assert s.proc.returncode == 0


def test_start_from_options(tmp_path):
    port = free_port()
    s = Started(server_argv("--port", str(port), "--save", "", "--always-show-logo", "yes"),
                cwd=tmp_path)
    try:
        s.wait_ready()
        assert f" PID: {s.proc.pid}" in s.text()
        assert command(port, "CONFIG", "GET", "port") == ["port", str(port)]
        assert command(port, "CONFIG", "GET", "save") == ["save", ""]
        if TARGET == "shoal":
            assert s.segment() == f"/dev/shm/shoal-{port}"
            # Started the Redis way, memcached and HTTP stay off unless asked.
            assert command(port, "CONFIG", "GET", "memcached-port")[1] == "0"
            assert command(port, "CONFIG", "GET", "http-port")[1] == "0"
    finally:
        s.stop()


def test_bad_directive_is_fatal(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text(f"port {free_port()}\nno-such-directive 1\n")
    out = subprocess.run(server_argv(str(conf)), capture_output=True, text=True, timeout=20)
    assert out.returncode != 0
    assert "*** FATAL CONFIG FILE ERROR (Redis 7.0." in out.stderr
    assert "Reading the configuration file, at line 2" in out.stderr
    assert ">>> 'no-such-directive 1'" in out.stderr
    assert "Bad directive or wrong number of arguments" in out.stderr
    out = subprocess.run(server_argv("--port", str(free_port()), "--appendonly", "maybe"),
                         capture_output=True, text=True, timeout=20)
    assert out.returncode != 0
    assert "argument must be 'yes' or 'no'" in out.stderr


def test_port_in_use_is_reported(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        s = Started(server_argv("--port", str(port), "--save", ""), cwd=tmp_path)
        try:
            wait_for(lambda: s.proc.poll() is not None, timeout=20, what="exit")
            time.sleep(0.1)
            assert f"Failed listening on port {port}" in s.text()
            assert s.proc.returncode != 0
        finally:
            s.stop()


def test_config_rewrite_keeps_comments_and_writes_changes(tmp_path):
    """CONFIG REWRITE rewrites a parameter's first line in place, drops its
    later lines, keeps comments, and appends changed parameters the file did
    not name (what Sentinel relies on)."""
    port = free_port()
    conf = tmp_path / "redis.conf"
    conf.write_text(
        "# top comment\n"
        f"port {port}\n"
        "hz 10\n"
        "# between\n"
        "hz 11\n"
        "save \"\"\n"
        "appendonly no\n"
    )
    server = Started(server_argv(str(conf)), cwd=tmp_path)
    try:
        server.wait_ready()
        assert command(port, "CONFIG", "SET", "hz", "15") == ["OK"]
        assert command(port, "CONFIG", "SET", "list-compress-depth", "3") == ["OK"]
        assert command(port, "CONFIG", "REWRITE") == ["OK"]
        lines = conf.read_text().splitlines()
        assert lines[0] == "# top comment"
        assert "# between" in lines
        assert [line for line in lines if line.startswith("hz ")] == ["hz 15"]
        assert lines.index("hz 15") < lines.index("# between")
        assert "list-compress-depth 3" in lines
        assert f"port {port}" in lines
    finally:
        server.stop()


def test_config_rewrite_without_a_file(raw):
    assert raw.cmd("CONFIG", "REWRITE") == Err("ERR The server is running without a config file")
