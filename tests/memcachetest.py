"""Helpers for the memcached text/meta suites: a real memcached 1.6 to hold
the expectations against, a raw text-protocol client that returns replies
byte for byte, and the `port` fixture parametrized over shoal and memcached.
"""

import os
import shutil
import socket
import subprocess

import pytest

from shoaltest import free_port, wait_for


class RealMemcached:
    """memcached 1.6 on a free TCP port; with `udp`, UDP on the same number
    (else UDP off)."""

    def __init__(self, extra_args=(), udp=False):
        self.mc_port = free_port()
        udp_port = str(self.mc_port) if udp else "0"
        argv = ["memcached", "-p", str(self.mc_port), "-U", udp_port, "-l", "127.0.0.1",
                *extra_args]
        if os.geteuid() == 0:
            argv += ["-u", "root"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.mc_port)).close()
                return True
            except OSError:
                return False

        wait_for(up, what="memcached to listen")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


class Mc:
    """One text-protocol connection. `ask` sends bytes and returns every reply
    byte they caused: it appends `mn` and reads up to memcached's `MN`, so
    that nothing extra can hide."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

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

    def read_until(self, end):
        while not self.buf.endswith(end):
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError(f"closed after {self.buf[-200:]!r}")
            self.buf += chunk
        data, self.buf = self.buf, b""
        return data

    def ask(self, data):
        self.send(data + b"mn\r\n")
        return self.read_until(b"MN\r\n")[:-4]

    def read_all(self, timeout=3.0):
        """Every byte until the server closes (True) or `timeout` of silence
        (False)."""
        self.sock.settimeout(timeout)
        data, self.buf = self.buf, b""
        try:
            while True:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    return data, True
                data += chunk
        except socket.timeout:
            return data, False
        except ConnectionResetError:
            return data, True


def empty(port):
    """Removes every item now (which also cancels a pending delayed
    flush_all on both servers)."""
    with Mc(port) as c:
        assert c.ask(b"flush_all\r\n") == b"OK\r\n"


@pytest.fixture(scope="session")
def memcached():
    if shutil.which("memcached") is None:
        pytest.skip("memcached is not installed (the reference for these tests)")
    m = RealMemcached()
    yield m
    m.stop()


def target_port(request):
    """The memcached port of an emptied shoal (the shared server) or real
    memcached, by the fixture's parameter."""
    if request.param == "shoal":
        port = request.getfixturevalue("server").mc_port
    else:
        port = request.getfixturevalue("memcached").mc_port
    empty(port)
    # Leave no delayed flush_all behind for later tests on the shared server.
    request.addfinalizer(lambda: empty(port))
    return port
