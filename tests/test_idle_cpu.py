"""An idle server uses next to no CPU: after a second to settle, the
supervisor and its workers together use at most 10 clock ticks (0.1 s at
USER_HZ 100) of user+system time over 10 seconds. A resource bound, not a
speed test."""

import os
import time

import pytest

from shoaltest import cpu_ticks

pytestmark = pytest.mark.shoal_only


def total_ticks(pids):
    return sum(cpu_ticks(p) for p in pids)


def test_idle_server_uses_almost_no_cpu(make_server):
    s = make_server(workers=2)
    with s.raw() as c:  # it serves (and one client came and went)
        assert c.cmd("PING") == "PONG"
    time.sleep(1)
    pids = [s.pid] + s.worker_pids()
    assert len(pids) == 3
    before = total_ticks(pids)
    time.sleep(10)
    assert s.worker_pids() == pids[1:], "a worker was restarted while idle"
    used = total_ticks(pids) - before
    hz = os.sysconf("SC_CLK_TCK")
    assert used <= 10 * hz // 100, f"idle supervisor + 2 workers used {used} ticks in 10 s"
