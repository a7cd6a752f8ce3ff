"""The servers the benchmarks compare, started the same way by every script.

redis-server without persistence and `shoal serve --workers 1`, each on a free
port of 127.0.0.1 and pinned to CPU 0 with taskset (shoal's worker inherits
the supervisor's affinity); the benchmark's client runs on CPU 1.
Only the standard library.
"""

import csv
import io
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHOAL_BIN = REPO / "target" / "release" / "shoal"
SERVER_CPU = "0"
CLIENT_CPU = "1"


def build_shoal():
    subprocess.run(["cargo", "build", "--release", "-p", "shoal"], cwd=REPO, check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not answer PING on port {port}")


def start_redis(port, extra=()):
    """redis-server on `port` (and what `extra` options add, such as a TLS
    port), answering PING on `port` when this returns."""
    proc = subprocess.Popen(
        ["taskset", "-c", SERVER_CPU, "redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--daemonize", "no", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc, "redis-server")
    return proc


def start_shoal(port, name, memory, memcached_port=0, http_port=0, extra=()):
    """`shoal serve --workers 1` on `port` with segment `name`, answering PING
    when this returns; memcached (TCP only) and HTTP listeners when given ports,
    and what `extra` options add (such as a TLS port)."""
    proc = subprocess.Popen(
        ["taskset", "-c", SERVER_CPU, str(SHOAL_BIN), "serve", "--workers", "1", "--port", str(port),
         "--name", name, "--memory", memory,
         "--memcached-port", str(memcached_port), "--memcached-udp-port", "0",
         "--http-port", str(http_port), "--nats-port", "0", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc, "shoal serve")
    return proc


def start_memcached(port, memory_mb=512):
    """memcached with one worker thread (`-t 1`) on `port` (TCP only),
    answering `version` when this returns."""
    argv = ["taskset", "-c", SERVER_CPU, "memcached", "-t", "1", "-p", str(port), "-U", "0",
            "-l", "127.0.0.1", "-m", str(memory_mb), "-c", "4096"]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_line(port, proc, "memcached", b"version\r\n", b"VERSION")
    return proc


def wait_line(port, proc, what, request, answer, timeout=20):
    """Waits until `request` sent to `port` is answered with `answer`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(request)
                if s.recv(64).startswith(answer):
                    return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not answer on port {port}")


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def remove_segment(name):
    try:
        os.unlink(f"/dev/shm/{name}")
    except FileNotFoundError:
        pass


def redis_version():
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    return out.split()[2].removeprefix("v=")


def cpu_seconds(root_pid):
    """User + system CPU seconds of `root_pid` and its descendants so far
    (shoal's supervisor and its workers), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = raw[raw.rindex(")") + 2:].split()
            stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in stats.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return sum(stats[p][1] for p in tree if p in stats) / ticks


def redis_benchmark(port, args, pipeline, requests, clients, keyspace):
    """Runs redis-benchmark on the client core; returns the last CSV row
    (the measured test) or None."""
    argv = ["taskset", "-c", CLIENT_CPU, "redis-benchmark", "-h", "127.0.0.1", "-p", str(port),
            "-c", str(clients), "-n", str(requests), "-P", str(pipeline), "-r", str(keyspace),
            "--csv"] + args
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None
    rows = [r for r in csv.DictReader(io.StringIO(p.stdout)) if r.get("rps")]
    if p.returncode != 0 or not rows:
        return None
    return rows[-1]


def benchmark_figures(port, args, pipeline, requests, clients, keyspace):
    """One redis-benchmark run: (requests/s, p50 ms, p99 ms) or None."""
    row = redis_benchmark(port, args, pipeline, requests, clients, keyspace)
    if row is None:
        return None
    return float(row["rps"]), float(row["p50_latency_ms"]), float(row["p99_latency_ms"])
