"""What scripts/redis-suite and scripts/client-suite share: a fresh server
(shoal or the reference redis-server) on free loopback ports for one run of
someone else's test suite, and the checked-in lists of tests that pass."""

import collections
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


_HANDED_OUT = set()


def free_port():
    """A loopback port nothing listens on now, never one this run handed out
    before (the kernel may offer a just-probed port again)."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no fresh port left")


def wait_port(port, proc, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server did not answer on port {port}")


class Server:
    """A fresh server: shoal (`--workers 2`) on a segment of its own, or
    redis-server with no persistence. With `tls_args` (a function of a
    port giving the TLS options) also a TLS port (`tls_port`)."""

    def __init__(self, target, shoal, scratch, tls_args=None, prefix="suite"):
        self.port = free_port()
        self.tls_port = free_port() if tls_args else None
        self.name = None
        out = open(os.path.join(scratch, f"server-{self.port}.log"), "w")
        if target == "shoal":
            self.name = f"{prefix}-{os.getpid()}-{self.port}"
            cmd = [shoal, "serve", "--workers", "2", "--port", str(self.port),
                   "--memcached-port", "0", "--memcached-udp-port", "0",
                   "--http-port", "0", "--nats-port", "0", "--name", self.name]
        else:
            cmd = ["redis-server", "--port", str(self.port), "--save", "",
                   "--appendonly", "no", "--dir", scratch]
        if tls_args:
            cmd += tls_args(self.tls_port)
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        wait_port(self.port, self.proc)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.name:
            # The segment and what lives beside it: the supervisor's
            # control socket, the script cache, the function libraries, a
            # busy function's description and a replica's link status.
            base = f"/dev/shm/{self.name}"
            for path in (base, f"{base}.ctl", f"{base}.functions", f"{base}.running",
                         f"{base}.repl", f"{base}.repl.tmp"):
                if os.path.exists(path):
                    os.remove(path)
            shutil.rmtree(f"{base}.scripts", ignore_errors=True)


def read_list(path):
    """A checked-in list of passing tests (one per line, `#` comments)."""
    if not os.path.exists(path):
        return collections.Counter()
    with open(path, encoding="utf-8") as f:
        return collections.Counter(line.rstrip("\n") for line in f
                                   if line.strip() and not line.startswith("#"))


def write_list(path, header, passed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# {header}\n")
        for test in sorted(passed.elements()):
            f.write(test + "\n")


def run_timed(cmd, cwd, timeout, suspects):
    """Runs `cmd` (a test runner) with a time limit; returns (output, timed
    out). When the limit passes, the runner's last lines and the stacks of
    every thread of the processes `suspects()` names (the servers under
    test, by pid) are printed before anything is killed, so that a hang in
    a CI log shows where each server was."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            out.seek(0)
            tail = out.read().decode("utf-8", "replace").splitlines()[-15:]
            print("  time limit passed; the runner's last lines:", flush=True)
            for line in tail:
                print(f"  | {line}", flush=True)
            for pid in suspects():
                print(f"  stacks of pid {pid}:", flush=True)
                for line in stacks(pid):
                    print(f"  | {line}", flush=True)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        out.seek(0)
        return out.read(), timed_out


def stacks(pid):
    """Each thread's stack of process `pid` (by gdb, when installed)."""
    if not shutil.which("gdb"):
        return ["(gdb is not installed)"]
    try:
        res = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 15"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
    except subprocess.TimeoutExpired:
        return ["(gdb did not finish)"]
    text = res.stdout.decode("utf-8", "replace").splitlines()
    return [line[:160] for line in text if line.startswith(("#", "Thread"))]


def process_tree(pid):
    """`pid` and its descendants (a server's supervisor and workers)."""
    found = [pid]
    for p in found:
        # A child is listed under the thread that started it.
        for path in glob.glob(f"/proc/{p}/task/*/children"):
            try:
                with open(path) as f:
                    found.extend(int(c) for c in f.read().split())
            except OSError:
                pass
    return found


def processes_matching(text):
    """Pids whose command line contains `text`."""
    res = subprocess.run(["pgrep", "-f", text], stdout=subprocess.PIPE, check=False)
    return [int(p) for p in res.stdout.split()]
