"""Fixtures for the end-to-end suite: a shared one-worker shoal server that is
emptied before each test, fresh servers for tests that need their own, and a
real redis-server for byte-for-byte comparisons."""

import pytest

from shoaltest import TARGET, DurableServer, Server, raw_on_worker


def pytest_configure(config):
    config.addinivalue_line("markers", "shoal_only: tests of shoal's own features "
                            "(workers, crash recovery); left out only when "
                            "SHOAL_TEST_TARGET=redis checks the suite against Redis")


def pytest_collection_modifyitems(config, items):
    if TARGET != "redis":
        return
    skip = pytest.mark.skip(reason="shoal-only test; SHOAL_TEST_TARGET=redis")
    for item in items:
        if "shoal_only" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def server():
    s = Server(workers=1).start()
    yield s
    s.stop()


@pytest.fixture
def r(server):
    """A redis-py client (str replies) on an empty store."""
    server.flush()
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def rb(server, r):
    """A redis-py client with bytes replies, same store as `r`."""
    c = server.client(decode_responses=False)
    yield c
    c.close()


@pytest.fixture
def raw(server, r):
    """A raw RESP connection to the emptied shared server."""
    c = server.raw()
    yield c
    c.close()


@pytest.fixture
def make_server():
    """Starts private servers (`make_server(workers=2)`); all are stopped and
    their segments removed at teardown, pass or fail."""
    started = []

    def make(**kw):
        s = Server(**kw)
        started.append(s)
        return s.start()

    yield make
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def redis_ref():
    """A real redis-server 7.0 (the yardstick) on its own free port."""
    s = Server(kind="redis").start()
    yield s
    s.stop()


@pytest.fixture
def conns():
    """`conns(server)` opens a Raw connection, `conns(server, slot)` one on
    worker `slot`; all are closed at teardown, pass or fail."""
    opened = []

    def open_(server, slot=None, **kw):
        c = server.raw(**kw) if slot is None else raw_on_worker(server, slot, **kw)
        opened.append(c)
        return c

    yield open_
    for c in opened:
        c.close()


@pytest.fixture
def durable(tmp_path):
    """`durable(appendfsync, **kw)` makes a DurableServer on its own
    directory under tmp_path (not started); all are killed and their
    segments removed at teardown."""
    made = []

    def make(appendfsync="everysec", subdir="data", **kw):
        s = DurableServer(tmp_path / subdir, appendfsync=appendfsync, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


@pytest.fixture(scope="module", params=["redis", "shoal"])
def srv(request):
    """redis-server 7.0, or a shoal with two workers (SHOAL_TEST_TARGET=redis
    makes both redis-server): for tests that pin Redis's behaviour and check
    shoal's against it."""
    s = Server(workers=2, kind="redis" if request.param == "redis" else None).start()
    yield s
    s.stop()
