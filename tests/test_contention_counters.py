"""fpmcore.collect.contention's counters: whose waiting counts, the foreign CPU, and a real neighbour seen as contention."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from fpmcore.collect.contention import Contention, ContentionBound, Reading, Sampler, sampler


def test_only_the_working_threads_waiting_counts():
    """The thread that ran the interval (40 ms of CPU, 1 ms waiting) and a worker (20 ms, 2 ms) count; a thread
    that woke briefly (0.5 ms of CPU, 3 ms waiting for a CPU) does not: it did not delay the work."""
    a = Reading({"1": (0, 0), "2": (0, 0), "3": (0, 0)}, other_cpu_ns=0)
    b = Reading({"1": (40_000_000, 1_000_000), "2": (20_000_000, 2_000_000), "3": (500_000, 3_000_000)},
                other_cpu_ns=7_000_000)  # fmt: skip
    c = Sampler(precise=True).between(a, b)
    assert c == Contention(cpu_seconds=0.0605, wait_seconds=0.003, foreign_seconds=0.007)
    assert not ContentionBound().contended(c, 0.1) and ContentionBound().contended(c, 0.05)


def test_a_precise_sampler_judges_the_others_over_half_a_second():
    """Others' CPU is their rate over the half second ending with the interval: a 5 ms kernel burst and one
    10 ms steal tick inside a 9 ms forward, after 0.6 s of readings at 1 % of a CPU, are 4 % of a CPU over the
    window, not 167 % of the forward; a neighbour running a whole CPU for the last half second is one CPU."""
    s = Sampler(precise=True, canary=False)
    ms = 1_000_000
    for i in range(7):  # readings every 0.1 s, others at 1 % of a CPU
        start = Reading({}, other_cpu_ns=i * ms, at=i * 0.1)
        s._window_rate(start, Reading({}, other_cpu_ns=i * ms, at=i * 0.1 + 0.009))
    start = Reading({}, other_cpu_ns=7 * ms, at=0.7)
    burst = Reading({}, other_cpu_ns=12 * ms, steal_ticks=1, at=0.709)
    rate = s._window_rate(start, burst)
    assert rate == pytest.approx((12 * ms / 1e9 - 2 * ms / 1e9 + s.tick) / 0.509) and rate < 0.04
    assert not ContentionBound().contended(Contention(0.009, 0.0, rate * 0.009), 0.009)
    assert len(s.history) <= 7  # only what a window needs is kept
    busy = Sampler(precise=True, canary=False)
    for i in range(7):  # a neighbour at one CPU
        busy._window_rate(Reading({}, other_cpu_ns=i * 100 * ms, at=i * 0.1),
                          Reading({}, other_cpu_ns=i * 100 * ms + 9 * ms, at=i * 0.1 + 0.009))  # fmt: skip
    rate = busy._window_rate(Reading({}, other_cpu_ns=700 * ms, at=0.7), Reading({}, other_cpu_ns=709 * ms, at=0.709))
    assert rate == pytest.approx(1.0)
    assert ContentionBound().contended(Contention(0.009, 0.0, rate * 0.009), 0.009)


def test_a_serving_sampler_reads_one_thread_and_the_others_rate_per_window():
    """A serving sampler reads only the calling thread per interval; the others' CPU of an interval is their
    rate over the last window (here set by hand: 0.3 CPU) times the interval's length."""
    s = Sampler(precise=False, window=3600.0)
    s.last, s.rate = (time.monotonic(), 0), 0.3
    start = s.start()
    assert list(start.threads) == [str(threading.get_native_id())]
    time.sleep(0.05)
    seen = s.stop(start)
    assert 0.3 * 0.05 <= seen.foreign_seconds < 0.3 * 0.5 and seen.slowdown == 0.0


def test_a_busy_neighbour_makes_a_cpu_bound_interval_contended():
    """A busy loop in another process beside a CPU-bound interval of this one: whether it waits for a CPU (one
    core) or shares the machine (more), the interval is contended and the loop's CPU is seen."""
    clock = sampler()
    assert clock is not None
    loop = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 20\nwhile time.time() < end: pass"]
    )
    try:
        time.sleep(0.3)
        start = clock.start()
        t0 = time.monotonic()
        x = 0
        for i in range(3_000_000):
            x += i
        wall = time.monotonic() - t0
        seen = clock.stop(start)
    finally:
        loop.kill()
        loop.wait()
    assert seen.foreign_seconds + seen.wait_seconds > 0.5 * wall
    assert ContentionBound().contended(seen, wall)


def test_a_serving_sampler_sees_a_busy_neighbour_from_the_tick_counters():
    """The serving sampler's foreign rate comes from ``/proc/stat`` minus this process's ticks: a busy loop in
    another process shows as about one CPU (at least half of one, the loop sharing the machine with this one),
    while this process's own CPU never counts as foreign."""
    s = Sampler(precise=False, window=0.2)
    own = s.start()
    time.sleep(0.25)  # the first window opens
    x = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.3:  # this process busy: not foreign
        x += 1
    quiet = s.stop(own)
    assert quiet.foreign_seconds / (time.monotonic() - own.at) < 0.5
    loop = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 20\nwhile time.time() < end: pass"]
    )
    try:
        time.sleep(0.3)
        for _ in range(3):  # windows that saw the loop
            start = s.start()
            time.sleep(0.25)
            seen = s.stop(start)
    finally:
        loop.kill()
        loop.wait()
    assert seen.foreign_seconds >= 0.5 * 0.25


def test_a_slow_canary_is_run_again_until_it_is_within_the_bound(monkeypatch):
    """A CPU out of idle runs the canary 50 % slow for its first runs, then at its best: not contended.  A CPU
    that stays 60 % slow (a host slowing the vCPU) is seen as such after the settling time."""
    from fpmcore.collect import contention

    s = Sampler(precise=True)
    s.best = 1.0
    runs = iter([1.5, 1.5, 1.5, 1.02])
    monkeypatch.setattr(contention, "canary", lambda: next(runs))
    assert s._canary() == 1.02
    monkeypatch.setattr(contention, "canary", lambda: 1.6)
    t0 = time.monotonic()
    assert s._canary() == 1.6 and time.monotonic() - t0 >= contention.CANARY_SETTLE
    assert s.best == 1.0


def test_the_calling_thread_cpu_time_is_its_clock():
    """50 ms of work on the calling thread, which never sleeps: its CPU time is seen, though ``schedstat`` is
    updated only at scheduler ticks."""
    s = Sampler(precise=False, window=3600.0)
    s.last = (time.monotonic(), 0)
    start = s.start()
    c0 = time.thread_time()
    x = 0
    while time.thread_time() - c0 < 0.05:  # 50 ms of this thread's CPU, however busy the machine is
        x += 1
    spent = time.thread_time() - c0
    seen = s.stop(start)
    assert spent - 0.005 <= seen.cpu_seconds <= spent + 0.005


def test_a_serving_sampler_takes_its_slowdown_from_its_latest_canary(monkeypatch):
    """Served steps run no canary; the engine about to idle runs one (at most once per window) and the steps
    after it carry its slowdown; an engine that never idles gets one quick canary per window between steps."""
    from fpmcore.collect import contention

    speeds = iter([1.0] * contention.CANARY_WARMUP + [1.6, 1.6, 1.6, 1.6, 1.0])
    monkeypatch.setattr(contention, "canary", lambda: next(speeds, 1.7))
    s = Sampler(precise=False, window=3600.0)
    s.idle()  # the first best (1.0), then a canary 60 % slow that does not settle in 30 ms... then 1.0
    assert s.best == 1.0 and s.slowdown == 0.0
    s.canary_at = float("-inf")
    monkeypatch.setattr(contention, "canary", lambda: 1.6)
    s.idle()
    assert s.slowdown == pytest.approx(0.6)
    seen = s.stop(s.start())
    assert seen.slowdown == pytest.approx(0.6) and ContentionBound(max_slowdown=0.4).contended(seen, 0.01)
    assert not ContentionBound().contended(seen, 0.01)  # recorded, not counted by default
    s.idle()  # within the window: no new canary
    monkeypatch.setattr(contention, "canary", lambda: 1.0)
    s.idle()
    assert s.slowdown == pytest.approx(0.6)
    s.window, s.last = 0.0, (time.monotonic() - 1, 0)  # a window passed without idling: one canary between steps
    assert s.stop(s.start()).slowdown == 0.0
