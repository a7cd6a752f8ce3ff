"""libmemcached's tools against shoal: memccapable (the protocol conformance
checker, ascii and binary) and short memcslap runs (load, then every
request's result checked through the server's statistics).
"""

import shutil
import subprocess

import pytest

from memcachetest import Mc, empty

needs = pytest.mark.skipif(
    shutil.which("memccapable") is None or shutil.which("memcslap") is None,
    reason="libmemcached-tools not installed")


@pytest.fixture
def port(server):
    empty(server.mc_port)
    yield server.mc_port
    empty(server.mc_port)


def stats(port):
    with Mc(port) as c:
        data = c.ask(b"stats\r\n")
    return {name: value for _, name, value in
            (line.decode().split(" ", 2) for line in data.split(b"\r\n")
             if line.startswith(b"STAT "))}


@needs
def test_memccapable_ascii(port):
    out = subprocess.run(["memccapable", "-h", "127.0.0.1", "-p", str(port), "-a"],
                         capture_output=True, text=True, timeout=120)
    assert "All tests passed" in out.stdout, out.stdout + out.stderr
    assert "[fail]" not in out.stdout


@needs
def test_memccapable_ascii_and_binary(port):
    out = subprocess.run(["memccapable", "-h", "127.0.0.1", "-p", str(port)],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.count("[pass]") >= 50, out.stdout
    assert "All tests passed" in out.stdout, out.stdout + out.stderr


@needs
@pytest.mark.parametrize("test,binary", [("set", False), ("get", False), ("mget", False),
                                         ("get", True)])
def test_memcslap(port, test, binary):
    before = stats(port)
    argv = ["memcslap", f"--servers=127.0.0.1:{port}", "--concurrency=4",
            "--execute-number=2000", f"--test={test}"]
    if binary:
        argv.append("--binary")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Time total" in out.stdout, out.stdout
    assert "fail" not in (out.stdout + out.stderr).lower(), out.stdout + out.stderr
    after = stats(port)

    def delta(name):
        return int(after[name]) - int(before[name])

    if test == "set":
        assert delta("cmd_set") == 8000
    else:
        # 2000 keys loaded, then 4 threads read each of them: all hits.
        assert delta("cmd_set") == 2000
        assert delta("get_hits") == 8000
        assert delta("get_misses") == 0
