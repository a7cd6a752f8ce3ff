"""Helpers for the end-to-end suite: start and stop real servers, and a tiny
RESP2/RESP3 client that returns replies exactly as sent (errors are values,
simple strings are `str`, bulk strings are `bytes`).

`SHOAL_BIN` names the binary (scripts/test sets it). `SHOAL_TEST_TARGET=redis`
runs the same tests against redis-server 7.0 instead, to check that the tests
themselves hold Redis's replies; only then are shoal-only tests left out.
"""

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent
SHOAL_BIN = os.environ.get("SHOAL_BIN", str(REPO / "target" / "release" / "shoal"))
TARGET = os.environ.get("SHOAL_TEST_TARGET", "shoal")

# Every server still running when Python exits (a crashed session, ^C) is
# stopped and its segment removed.
_LIVE = set()
atexit.register(lambda: [s.stop() for s in list(_LIVE)])


# Every port handed out in this run: the kernel may offer a port again as
# soon as its probe socket closes, and one server given one number for two
# protocols (or two servers one port) would split connections between them.
_HANDED_OUT = set()


def free_port():
    """A TCP port nothing listens on now (the kernel picks it), never one
    this run handed out before."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no fresh port left")


def stopped(pid):
    """SIGSTOP `pid` and wait until every thread of it is stopped (the
    signal is delivered asynchronously)."""
    os.kill(pid, signal.SIGSTOP)

    def all_stopped():
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
                        return False
            except FileNotFoundError:
                pass
        return True

    wait_for(all_stopped, what="the process to stop")


@contextlib.contextmanager
def paused(pid):
    """Stops `pid` (see `stopped`) for the `with` block, then lets it run."""
    stopped(pid)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def port_refused(port):
    """Whether nothing listens on 127.0.0.1:`port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        # Queued on a socket that closed as it moved: try again.
        return False


def wait_for(pred, timeout=10.0, step=0.02, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what}")



def remove_segment_files(path):
    """Removes a segment file and the files shoal keeps beside it:
    `<segment>.ctl`, the script cache `<segment>.scripts/`, the function
    libraries `<segment>.functions`, a busy function's description
    `<segment>.running` and a replica's link target `<segment>.repl`.
    Missing ones are fine."""
    for p in (path, f"{path}.ctl", f"{path}.functions", f"{path}.running",
              f"{path}.repl", f"{path}.repl.tmp"):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    shutil.rmtree(f"{path}.scripts", ignore_errors=True)

class Server:
    """One `shoal serve` (or, with SHOAL_TEST_TARGET=redis, one redis-server)
    on a free port with a private segment name."""

    def __init__(self, workers=1, memory="64m", kind=None, extra_args=()):
        self.kind = kind or TARGET
        self.workers = workers
        self.memory = memory
        # More `shoal serve` flags (e.g. ["--item-size-max", "1000"]).
        self.extra_args = list(extra_args)
        self.proc = None
        self.port = None
        self.mc_port = None
        self.http_port = None
        self.nats_port = None
        self.name = None
        self.output = []

    # -- lifecycle -----------------------------------------------------
    def start(self, timeout=20.0):
        self.port = free_port()
        # Private memcached (TCP and UDP on one number) and HTTP ports: the
        # defaults would make every test server share 11211 and 8080.
        self.mc_port = free_port()
        self.http_port = free_port()
        self.nats_port = free_port()
        self.name = f"shoal-pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if self.kind == "shoal":
            argv = [SHOAL_BIN, "serve", "--workers", str(self.workers),
                    "--port", str(self.port), "--name", self.name,
                    "--memcached-port", str(self.mc_port),
                    "--memcached-udp-port", str(self.mc_port),
                    "--http-port", str(self.http_port),
                    "--nats-port", str(self.nats_port),
                    "--memory", self.memory, *self.extra_args]
        else:
            argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no"]
        self.output = []
        ready = threading.Event()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def drain(proc=self.proc, out=self.output):
            for line in proc.stdout:
                line = line.decode(errors="replace").rstrip("\n")
                out.append(line)
                if "shoal ready" in line or "Ready to accept connections" in line:
                    ready.set()

        threading.Thread(target=drain, daemon=True).start()
        _LIVE.add(self)
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.kind} did not start: " + "\n".join(self.output))
        return self

    def stop(self):
        """SIGTERM, wait, SIGKILL if it hangs; remove the segment."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                for pid in self.worker_pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                p.kill()
                p.wait()
        self.proc = None
        _LIVE.discard(self)
        self.remove_segment()

    def remove_segment(self):
        """The segment and what lives beside it: the supervisor's control
        socket (left behind when a test kills the supervisor), the script
        cache directory and the function libraries."""
        if self.kind == "shoal" and self.name:
            remove_segment_files(f"/dev/shm/{self.name}")

    def restart(self):
        self.stop()
        return self.start()

    @property
    def pid(self):
        return self.proc.pid

    def worker_pids(self):
        """Children of the supervisor (the workers), from /proc."""
        if self.proc is None:
            return []
        return children_of(self.proc.pid)

    # -- clients ---------------------------------------------------------
    def client(self, **kw):
        kw.setdefault("decode_responses", True)
        kw.setdefault("socket_timeout", 30)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def raw(self, **kw):
        return Raw(self.port, **kw)

    def flush(self):
        """An empty store for the next test: FLUSHALL, or a fresh server where
        FLUSHALL is not there yet."""
        if self.proc is None or self.proc.poll() is not None:
            self.stop()  # removes the dead server's segment
            self.start()
            return
        try:
            with self.raw() as c:
                if c.cmd("FLUSHALL") == "OK":
                    return
        except OSError:
            pass
        self.restart()


def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(d))
    return sorted(kids)


def cpu_ticks(pid):
    """utime + stime of one process, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


# ---------------------------------------------------------------------------
# A raw RESP client.


class Err(str):
    """An error reply: the text after '-' ("ERR syntax error")."""

    def __repr__(self):
        return f"Err({str.__repr__(self)})"


class Double(float):
    """A RESP3 double (','), kept apart from integers and bulk strings."""

    def __repr__(self):
        return f"Double({float.__repr__(self)})"


class Map(dict):
    """A RESP3 map ('%')."""


class RSet(list):
    """A RESP3 set ('~'), order as sent."""


class Push(list):
    """A RESP3 push ('>')."""


class Verbatim(bytes):
    """A RESP3 verbatim string ('='); the bytes after the 4-byte format."""


class BigNumber(int):
    """A RESP3 big number ('(')."""


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, (int, float)):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Raw:
    """A socket and a RESP parser; `cmd` sends one command and returns the
    reply, `send` writes bytes as given."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.consumed = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def cmd(self, *args):
        self.send(encode(*args))
        return self.reply()

    def pipeline(self, *cmds):
        self.send(b"".join(encode(*c) for c in cmds))
        return [self.reply() for _ in cmds]

    def reply_bytes(self):
        """The exact bytes of the next reply."""
        self.consumed = b""
        self.reply()
        return self.consumed

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by server")
        self.buf += data

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                self.consumed += line + b"\r\n"
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        self.consumed += data + b"\r\n"
        return data

    def silent_for(self, seconds):
        """Whether nothing arrives within `seconds` (a reply that must wait
        for something the test holds back)."""
        self.sock.settimeout(seconds)
        try:
            self._fill()
            return False
        except socket.timeout:
            return True
        finally:
            self.sock.settimeout(10.0)

    def read_all(self, timeout=2.0):
        """Every byte until the server closes the connection (or `timeout`
        of silence)."""
        self.sock.settimeout(timeout)
        data, self.buf = self.buf, b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return data, True
                data += chunk
        except socket.timeout:
            return data, False
        except ConnectionResetError:
            return data, True

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Err(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        if t == b"_":
            return None
        if t == b",":
            return Double(float(rest))
        if t == b"#":
            return rest == b"t"
        if t == b"(":
            return BigNumber(int(rest))
        if t == b"=":
            return Verbatim(self._exact(int(rest))[4:])
        if t == b"%":
            m = Map()
            for _ in range(int(rest)):
                k = self.reply()
                if isinstance(k, list):
                    k = tuple(k)
                m[k] = self.reply()
            return m
        if t == b"~":
            return RSet(self.reply() for _ in range(int(rest)))
        if t == b">":
            return Push(self.reply() for _ in range(int(rest)))
        if t == b"|":
            for _ in range(int(rest)):
                self.reply()
                self.reply()
            return self.reply()
        raise AssertionError(f"bad reply line {line!r}")


# ---------------------------------------------------------------------------
# Placing clients on a chosen worker process.


def worker_slot(conn):
    """The worker slot serving a `Raw` connection, from CLIENT INFO's
    `worker=N` (shoal only; Redis has no such field)."""
    info = conn.cmd("CLIENT", "INFO")
    if isinstance(info, bytes):
        info = info.decode()
    for field in str(info).split():
        if field.startswith("worker="):
            return int(field[len("worker="):])
    raise AssertionError(f"no worker= in CLIENT INFO: {info!r}")


def raw_on_worker(server, slot, tries=400, **kw):
    """A `Raw` connection that SO_REUSEPORT handed to worker `slot`: connects
    until CLIENT INFO says `worker=<slot>`, closing the others."""
    for _ in range(tries):
        c = server.raw(**kw)
        try:
            if worker_slot(c) == slot:
                return c
        except BaseException:
            c.close()
            raise
        c.close()
    raise AssertionError(f"no connection reached worker {slot} in {tries} tries")


def worker_slot_pids(server):
    """{slot: pid} of the supervisor's worker children, from their argv
    (`--slot N`)."""
    out = {}
    for pid in server.worker_pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--slot" in argv:
            out[int(argv[argv.index(b"--slot") + 1])] = pid
    return out


class FrameReader:
    """Reads a stream of flat RESP arrays or pushes (pub/sub messages: bulk
    strings, integers, nils) from a `Raw` connection much faster than
    `Raw.reply`, for tests that receive tens of thousands of messages. Takes
    over the connection's socket and unparsed bytes."""

    def __init__(self, conn):
        self.conn = conn
        self.sock = conn.sock
        self.buf = bytearray(conn.buf)
        conn.buf = b""
        self.pos = 0

    def release(self):
        """Hands the bytes not parsed yet back to the `Raw` connection."""
        self.conn.buf = bytes(self.buf[self.pos:]) + self.conn.buf
        self.buf, self.pos = bytearray(), 0

    def _more(self):
        del self.buf[:self.pos]
        self.pos = 0
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("connection closed by server")
        self.buf += data

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos:i])
                self.pos = i + 2
                return line
            self._more()

    def frame(self):
        """The next array or push as a list: bytes, int or None items."""
        head = self._line()
        if head[:1] not in (b"*", b">"):
            raise AssertionError(f"not an array or push: {head!r}")
        out = []
        for _ in range(int(head[1:])):
            line = self._line()
            t = line[:1]
            if t == b"$":
                n = int(line[1:])
                if n < 0:
                    out.append(None)
                    continue
                while len(self.buf) < self.pos + n + 2:
                    self._more()
                out.append(bytes(self.buf[self.pos:self.pos + n]))
                self.pos += n + 2
            elif t == b":":
                out.append(int(line[1:]))
            elif t == b"_":
                out.append(None)
            else:
                raise AssertionError(f"unexpected item {line!r}")
        return out


# ---------------------------------------------------------------------------
# Persistence: servers with `--dir` that crash, reboot and start again.


def descendants(pid):
    """Every process below `pid` (children, their children, ...), from /proc."""
    parent_of = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            parent_of[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent_of.items() if pp == p]
        found += kids
        frontier += kids
    return sorted(found)


def process_gone(pid):
    """True when `pid` has exited (gone from /proc, or a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class DurableServer(Server):
    """`shoal serve --dir DIR --appendfsync POLICY` that keeps its segment
    name across starts, so a test can crash it (`kill_all`), lose the segment
    as a reboot would (`remove_segment`) and start it again on the same
    directory. `env` adds environment variables (SHOAL_TEST_FSYNC_GATE).
    Each start takes fresh ports; `output` holds the last start's lines."""

    def __init__(self, dir, appendfsync="everysec", workers=2, memory="256m",
                 extra_args=(), env=None):
        super().__init__(workers=workers, memory=memory, kind="shoal")
        self.dir = Path(dir)
        self.appendfsync = appendfsync
        self.persist_args = list(extra_args)
        self.env = dict(env or {})
        self.name = f"shoal-pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def argv(self):
        args = [SHOAL_BIN, "serve", "--workers", str(self.workers),
                "--port", str(self.port), "--name", self.name,
                "--memcached-port", str(self.mc_port),
                "--memcached-udp-port", str(self.mc_port),
                "--http-port", str(self.http_port),
                "--nats-port", str(self.nats_port),
                "--memory", self.memory, "--dir", str(self.dir)]
        if self.appendfsync is not None:
            args += ["--appendfsync", self.appendfsync]
        return args + self.persist_args

    def _spawn(self, same_ports=False):
        if not same_ports:
            self.port, self.mc_port, self.http_port = free_port(), free_port(), free_port()
            self.nats_port = free_port()
        self.output = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**os.environ, **self.env})

        def drain(proc=self.proc, out=self.output, ready=self.ready):
            for line in proc.stdout:
                line = line.decode(errors="replace").rstrip("\n")
                out.append(line)
                if "shoal ready" in line:
                    ready.set()

        self.drainer = threading.Thread(target=drain, daemon=True)
        self.drainer.start()
        _LIVE.add(self)

    def start(self, timeout=120.0, same_ports=False):
        """Starts and waits for "shoal ready" (recovery may take a while).
        `same_ports` keeps the last start's ports (a server others know by
        its address, as Sentinel does)."""
        self._spawn(same_ports)
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                code = self.proc.poll()
                self.drainer.join(5)
                out = "\n".join(self.output)
                self.kill_all()
                raise RuntimeError(f"shoal did not start (exit {code}):\n{out}")
        return self

    def start_failing(self, timeout=120.0):
        """Starts a server that is expected to refuse to start: returns
        (exit code, output). A server that does start instead is killed and
        the test fails."""
        self._spawn()
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if self.ready.is_set() or time.monotonic() > deadline:
                out = "\n".join(self.output)
                self.kill_all()
                raise AssertionError(f"shoal started although it should refuse:\n{out}")
            time.sleep(0.05)
        self.drainer.join(5)
        code = self.proc.returncode
        self.proc = None
        _LIVE.discard(self)
        return code, "\n".join(self.output)

    def text(self):
        return "\n".join(self.output)

    def kill_all(self):
        """A crash of every shoal process: the supervisor is stopped first
        (so it cannot start a replacement), then it and everything below it
        get SIGKILL. The segment stays."""
        p = self.proc
        if p is None:
            return
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
            below = descendants(p.pid)
            for pid in below + [p.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()
            for pid in below:
                wait_for(lambda: process_gone(pid), what=f"process {pid} to die")
        self.proc = None
        _LIVE.discard(self)

    def shutdown(self, timeout=60):
        """A clean stop (SIGTERM), keeping the segment; returns the exit code."""
        p = self.proc
        code = None
        if p is not None:
            below = descendants(p.pid)
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            code = p.wait(timeout)
            for pid in below:
                wait_for(lambda: process_gone(pid), what=f"process {pid} to exit")
            self.drainer.join(5)
        self.proc = None
        _LIVE.discard(self)
        return code

    def reboot(self, timeout=120.0):
        """SIGKILL everything, lose the segment, start on the same dir."""
        self.kill_all()
        self.remove_segment()
        return self.start(timeout)

    def stop(self):
        """Cleanup: SIGKILL whatever runs and remove the segment."""
        self.kill_all()
        self.remove_segment()


def info_section(conn, section):
    """`INFO <section>` of a `Raw` connection as a dict of str -> str."""
    text = conn.cmd("INFO", section)
    if isinstance(text, bytes):
        text = text.decode()
    out = {}
    for line in str(text).splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def fast_pipeline(conn, cmds):
    """Sends `cmds` on a `Raw` connection and returns their replies as
    `Raw.reply` would (RESP2 kinds only), parsing with an index into one
    buffer: thousands of replies in a row stay linear."""
    conn.send(b"".join(encode(*c) for c in cmds))
    buf = bytearray(conn.buf)
    pos = 0

    def more():
        data = conn.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("connection closed by server")
        buf.extend(data)

    def line():
        nonlocal pos
        while True:
            i = buf.find(b"\r\n", pos)
            if i >= 0:
                out = bytes(buf[pos:i])
                pos = i + 2
                return out
            more()

    def one():
        nonlocal pos
        head = line()
        t, rest = head[:1], head[1:]
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(buf) < pos + n + 2:
                more()
            out = bytes(buf[pos:pos + n])
            pos += n + 2
            return out
        if t == b":":
            return int(rest)
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Err(rest.decode())
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [one() for _ in range(n)]
        raise AssertionError(f"unexpected reply line {head!r}")

    replies = [one() for _ in cmds]
    conn.buf = bytes(buf[pos:])
    return replies


def store_state(conn, dbs=16, batch=2000):
    """Everything a `Raw` connection's store holds, for exact comparisons:
    {(db, key): (type, value, pexpiretime)} with the value as GET (bytes),
    LRANGE (list), HGETALL (sorted pairs), SMEMBERS (sorted), ZRANGE
    WITHSCORES (list of (member, score bytes)). Leaves the connection on db 0."""
    state = {}
    for db in range(dbs):
        assert conn.cmd("SELECT", db) == "OK"
        keys, cursor = [], b"0"
        while True:
            [(cursor, page)] = fast_pipeline(conn, [("SCAN", cursor, "COUNT", 10000)])
            keys += page
            if cursor == b"0":
                break
        keys = sorted(set(keys))
        for i in range(0, len(keys), batch):
            chunk = keys[i:i + batch]
            types = fast_pipeline(conn, [("TYPE", k) for k in chunk])
            reads = []
            for k, t in zip(chunk, types):
                reads.append({"string": ("GET", k), "list": ("LRANGE", k, 0, -1),
                              "hash": ("HGETALL", k), "set": ("SMEMBERS", k),
                              "zset": ("ZRANGE", k, 0, -1, "WITHSCORES"),
                              "none": ("EXISTS", k)}.get(t, ("TYPE", k)))
                reads.append(("PEXPIRETIME", k))
            got = fast_pipeline(conn, reads)
            for j, (k, t) in enumerate(zip(chunk, types)):
                v, exp = got[2 * j], got[2 * j + 1]
                if t == "none":
                    continue  # expired between SCAN and TYPE
                if t == "hash":
                    v = sorted(zip(v[0::2], v[1::2]))
                elif t == "set":
                    v = sorted(v)
                elif t == "zset":
                    v = list(zip(v[0::2], v[1::2]))
                state[(db, k)] = (t, v, exp)
    assert conn.cmd("SELECT", 0) == "OK"
    return state


def state_diff(want, got, limit=20):
    """The differences of two `store_state` results, readably (empty if equal)."""
    lines = []
    for k in sorted(set(want) | set(got), key=repr):
        if want.get(k) != got.get(k):
            lines.append(f"{k!r}: want {want.get(k)!r:.300}, got {got.get(k)!r:.300}")
            if len(lines) >= limit:
                lines.append("...")
                break
    return "\n".join(lines)
