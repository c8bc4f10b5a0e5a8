"""What the machine did to a timed interval: the engine's own CPU time, its waits for a CPU, and others' CPU time.

A forward timed on a shared machine measures the engine *and* whatever else
ran beside it.  Every timed interval of ``fpm collect`` (each engine run of a
repetition: its measured forward and the few forwards around it) and of
``fpm verify`` (each served step) therefore records, besides its wall time, a
:class:`Contention`:

``cpu_seconds``
    CPU time of every thread of this process (the in-process engine's
    threads) during the interval.
``wait_seconds``
    Time this process's working threads were **runnable but waiting for a
    CPU** (the scheduler's run delay; :class:`Sampler` says which threads
    are working).
``foreign_seconds``
    CPU time that **every other task on the machine** used during the
    interval, plus the time the hypervisor gave this machine's CPUs to
    someone else (steal).

**Where the numbers come from (Linux).**  ``/proc/<pid>/task/<tid>/schedstat``
holds, per thread, the nanoseconds it ran and the nanoseconds it waited on a
run queue (``sched_info``; present whenever the kernel has
``CONFIG_SCHED_INFO``, which every distribution kernel has, unlike the
system-wide ``/proc/schedstat`` which needs ``CONFIG_SCHEDSTATS``).  The own
figures sum it over ``/proc/self/task/*``; the foreign CPU sums it over every
other task in ``/proc`` (:attr:`Sampler.precise`, about 2 ms per reading
with 120 processes: taken outside the timed interval, once before and once
after) or, for served steps where a reading per step would perturb the
engine, as the others' CPU rate over the last half second from the tick
counters of ``/proc/stat`` and ``/proc/self/stat`` (:class:`Sampler`);
steal comes from ``/proc/stat``.  ``getrusage(RUSAGE_THREAD)``
was not chosen: it gives the calling thread's CPU time and a count of
involuntary context switches, not a duration of waiting, and nothing about
other processes.

**Why both a wait and a foreign figure.**  Run delay alone misses the most
common contention of a small VM: on a 2-vCPU machine of this project's kind,
one busy loop on the other vCPU slowed a CPU-bound interval by 75 % while the
interval's run delay stayed at zero (the vCPUs share a physical core, caches
and memory bandwidth) — the slowdown shows up as *more own CPU time*, which
no per-thread counter can tell from real work.  What can be seen is that
someone else was running: ``foreign_seconds`` was 100 % of the wall time
with the loop and under 3 % without it.

**What no counter shows.**  This project's machines are virtual: the host
may run another tenant on the physical core behind a vCPU, or slow it, and
nothing inside the guest counts that (no steal time was recorded).  So a
precise :class:`Sampler` also times a fixed piece of CPU work, the *canary*
(:func:`canary`, ≈ 0.3 ms), right after each interval, while the CPU is still
busy, and records how much slower than its best run so far it was
(``slowdown``).  It runs after the interval, not before: a CPU that was idle a
moment ago runs the first work 40–60 % slower (measured with 50 ms pauses),
which is the engine's own state at a light load — a canary before the forward
would both warm the CPU for it and call the pause contention.

**The slowdown is recorded, not counted.**  A bound may count it
(:attr:`ContentionBound.max_slowdown`), and none does by default.  On a 2-vCPU
EPYC guest of this project's kind the canary ran 5–47 % over its best in
half-second spells with nothing else running, and a tiny hybrid's samples were
12–22 % apart from one to the next (decode steps of one point between 4.4 and
10 ms) with the canary after them telling little of it: samples after a canary
within 10 % of its best were 10 % over the point's fastest in the median,
after one 25–40 % over it 30 %.  The served steps run on the same host and
scatter alike, so a sample the host slowed is a sample of the machine the
engine serves on: retaking it (as the bound once did, at 40 %) left the table
with the fast spells and predicted served decode steps 1.3–1.9 times too fast.
The table keeps every sample the counters call clean and reduces them by their
mean (:func:`fpmcore.validate.measured_values.trimmed_mean`).

**Nothing between two forwards.**  The engine's forwards run back to back
when it serves; any work between two of them cools the caches and branch
predictors the next one uses.  Measured on the tiny llama of this project: a
precise reading and the canary between the forwards of a decode repetition
made its measured forward 2.5 ms instead of 2.1 ms, and after a 20 ms pause
(sleeping or spinning) a decode forward took 3.7 ms and needed about ten
forwards to get back to 1.7 ms.  So ``fpm collect`` reads the counters before
the first forward of a repetition's engine run and after its last, never
between two of them, and a measured forward carries its run's contention in
proportion to its wall time (:meth:`Contention.share`; its fractions are the
run's).  A served step reads only the calling thread's one file around it.

**The bound** (:class:`ContentionBound`): a sample is *contended* when its
waiting exceeds 5 % of its wall time or when others used more than 10 % of
a CPU over the half second ending with it (:attr:`Sampler.window`; the
interval itself when it is longer).  A neighbour using one tenth of a CPU
can move a forward by up to the machine's own step-to-step noise (a few per
cent), so the bound flags the samples a neighbour could have moved beyond
that noise.  Both fractions are of the interval's wall time.

**Why the others' CPU over half a second, not over the sample.**  A
neighbour that moves a table is one that stays: a build, a test suite, a
busy loop, at 50–100 % of a CPU for seconds.  What an idle machine of this
kind runs beside a forward is kernel work in bursts (writeback, the memory
monitor ``kdamond``, the guest agent) and steal counted in whole 10 ms
ticks: measured with nothing else running, others used 0.9 % of a CPU over
the median 9 ms interval and 2.5 % at the 90th percentile, but more than
10 % over 7 % of them (one steal tick is 110 % of a 9 ms interval).  Judged
per sample, a campaign of ms-scale decode samples retook a sample in every
visit and, with the retake pauses, did a third of its work in ten minutes;
the bursts themselves move a 9 ms forward by less than a millisecond, which
the trimmed mean of twenty samples absorbs.  Over half a second the
background is 1–3 % and a busy neighbour 50–100 %: the rate tells them
apart, and the per-sample waiting still catches a forward that was itself
kept off its CPU.

Where ``/proc/self/task/*/schedstat`` cannot be read (not Linux), no
:class:`Sampler` exists (:func:`sampler` returns ``None``) and the intervals
record no contention; ``fpm validate`` then refuses the run (a measurement
that cannot show it was clean is not a clean measurement).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import attrs

#: Fractions of an interval's wall time above which it is contended (module docstring).
MAX_WAIT_FRACTION = 0.05
MAX_FOREIGN_FRACTION = 0.10
#: The canary's slowdown above which an interval is contended when a bound counts it (module docstring:
#: by default none does).
MAX_SLOWDOWN = 0.4


@attrs.frozen
class Contention:
    """What the machine did to one timed interval (module docstring), in seconds."""

    cpu_seconds: float
    wait_seconds: float
    foreign_seconds: float
    #: how much slower than its best a fixed CPU canary ran right after the interval (0.1: 10 % slower)
    slowdown: float = 0.0

    def as_json(self) -> dict[str, float]:
        return {"cpu_seconds": self.cpu_seconds, "wait_seconds": self.wait_seconds,
                "foreign_seconds": self.foreign_seconds, "slowdown": self.slowdown}  # fmt: skip

    @classmethod
    def from_json(cls, value: Any) -> Contention | None:
        """The contention of a record, or ``None`` when it is not three numbers ≥ 0."""
        if not isinstance(value, dict):
            return None
        got = [value.get(k) for k in ("cpu_seconds", "wait_seconds", "foreign_seconds")]
        got.append(value.get("slowdown", 0.0))
        numbers = [float(v) for v in got if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) != 4 or not all(0 <= v < float("inf") for v in numbers):
            return None
        return cls(*numbers)

    def share(self, fraction: float) -> Contention:
        """The part of this interval's contention that falls on a sub-interval holding ``fraction`` of its wall
        time (times scaled, the canary's slowdown kept): a measured forward's share of its engine run's."""
        return Contention(self.cpu_seconds * fraction, self.wait_seconds * fraction,
                          self.foreign_seconds * fraction, self.slowdown)  # fmt: skip

    def __add__(self, other: Contention) -> Contention:
        """Two intervals' contention together (a serving's total): times summed, the worse slowdown."""
        return Contention(self.cpu_seconds + other.cpu_seconds, self.wait_seconds + other.wait_seconds,
                          self.foreign_seconds + other.foreign_seconds,
                          max(self.slowdown, other.slowdown))  # fmt: skip


@attrs.frozen
class ContentionBound:
    """When an interval counts as contended (module docstring: the 5 % / 10 % bound)."""

    max_wait_fraction: float = MAX_WAIT_FRACTION
    max_foreign_fraction: float = MAX_FOREIGN_FRACTION
    #: ``None``: the canary's slowdown is recorded, not counted (module docstring)
    max_slowdown: float | None = None

    def contended(self, contention: Contention | None, wall: float) -> bool:
        """Whether an interval of ``wall`` seconds with ``contention`` is contended (unmeasured: it is)."""
        if contention is None:
            return True
        wall = max(wall, 1e-9)
        return (contention.wait_seconds > self.max_wait_fraction * wall
                or contention.foreign_seconds > self.max_foreign_fraction * wall
                or (self.max_slowdown is not None and contention.slowdown > self.max_slowdown))  # fmt: skip

    def describe(self, contention: Contention | None, wall: float) -> str:
        """``wait 12% foreign 80% slowdown 5% of 0.031 s`` — how contended an interval was, for diagnostics."""
        if contention is None:
            return "contention unmeasured"
        wall = max(wall, 1e-9)
        return (f"wait {contention.wait_seconds / wall:.0%} foreign {contention.foreign_seconds / wall:.0%} "
                f"slowdown {contention.slowdown:.0%} of {wall:.3g} s")  # fmt: skip

    def as_json(self) -> dict[str, float]:
        """The bound's record (``max_slowdown`` only when the bound counts the canary)."""
        out = {"max_wait_fraction": self.max_wait_fraction, "max_foreign_fraction": self.max_foreign_fraction}
        if self.max_slowdown is not None:
            out["max_slowdown"] = self.max_slowdown
        return out

    @classmethod
    def from_json(cls, value: Any) -> ContentionBound | None:
        if not isinstance(value, dict):
            return None
        got = [value.get("max_wait_fraction"), value.get("max_foreign_fraction")]
        slow = value.get("max_slowdown")
        if slow is not None:
            got.append(slow)
        numbers = [float(v) for v in got if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) != len(got) or not all(0 < v <= 1 for v in numbers[:2]):
            return None
        if slow is not None and not 0 < numbers[2] < 100:
            return None
        return cls(numbers[0], numbers[1], numbers[2] if slow is not None else None)


@attrs.frozen
class Reading:
    """One reading of the counters: per own thread ``tid → (cpu ns, run delay ns)``, the other tasks' CPU
    nanoseconds (precise mode), and the ``/proc/stat`` steal ticks."""

    threads: dict[str, tuple[int, int]]
    other_cpu_ns: int
    steal_ticks: int = 0
    #: the monotonic clock at the reading
    at: float = attrs.field(factory=time.monotonic)


def _task_schedstat(path: str) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            parts = f.read().split()
        return int(parts[0]), int(parts[1])
    except (OSError, ValueError, IndexError):
        return None


def _threads(pid: str = "self") -> dict[str, tuple[int, int]]:
    base = f"/proc/{pid}/task"
    try:
        tasks = os.listdir(base)
    except OSError:
        return {}
    out = {}
    for t in tasks:
        got = _task_schedstat(f"{base}/{t}/schedstat")
        if got is not None:
            out[t] = got
    return out


def _steal_ticks() -> int:
    """The steal ticks of all CPUs (``/proc/stat``: the 8th figure of the ``cpu`` line)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()[1:]
        return int(fields[7]) if len(fields) > 7 else 0
    except (OSError, ValueError):
        return 0


def _foreign_ticks() -> int:
    """Clock ticks every CPU spent on tasks of other processes, and stolen, so far: the busy ticks of
    ``/proc/stat`` (user, nice, system, irq, softirq, steal) minus this process's own (``/proc/self/stat``
    utime and stime).  Two small files: cheap enough to read between served steps, precise to a tick."""
    try:
        with open("/proc/stat", "rb") as f:
            cpu = [int(x) for x in f.readline().split()[1:9]]
        with open("/proc/self/stat", "rb") as f:
            mine = f.read().rsplit(b")", 1)[1].split()
        busy = cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6] + cpu[7]
        return max(0, busy - int(mine[11]) - int(mine[12]))
    except (OSError, ValueError, IndexError):
        return 0


def _others_cpu_ns() -> int:
    """The CPU nanoseconds every task of every other process has run (each ``schedstat`` under ``/proc``)."""
    me, other = str(os.getpid()), 0
    for name in os.listdir("/proc"):
        if name.isdigit() and name != me:
            other += sum(cpu for cpu, _ in _threads(name).values())
    return other


_CANARY_DATA = bytes(range(256)) * 256
#: Canary runs taken as the first best.
CANARY_WARMUP = 20
#: Seconds a slow canary is run again until it is within the bound (:meth:`Sampler._canary`).
CANARY_SETTLE = 0.03


def canary() -> float:
    """Seconds of a fixed piece of CPU work (SHA-256 of 64 KiB and an integer sum of 3,000 terms: about 65 µs
    on this project's machines), the fastest of four runs back to back."""
    import hashlib  # imported here, before any timing, so that importing the module stays cheap

    out = float("inf")
    for _ in range(4):
        t = time.perf_counter()
        hashlib.sha256(_CANARY_DATA).digest()
        sum(range(3000))
        out = min(out, time.perf_counter() - t)
    return out


#: A thread of this process counts as one of the interval's working threads when it ran at least this
#: fraction of the busiest thread's CPU time over the interval.
WORKING_SHARE = 0.25


@attrs.define
class Sampler:
    """Reads the counters of the module docstring around a timed interval: :meth:`start` right before it,
    :meth:`stop` right after it.

    ``precise``: the foreign CPU from every task's ``schedstat`` (about 2 ms a
    reading, taken outside the interval: :meth:`start` reads the other tasks
    first and this process's threads last, :meth:`stop` the other way round,
    so this process's figures cover the interval and not the reading;
    ``fpm collect``).  Otherwise (``fpm verify``'s served steps, where any
    work between two steps delays the served requests and cools the next step)
    a reading is one file, the calling thread's ``schedstat`` (a few
    microseconds), and the foreign CPU of an interval is the others' CPU rate
    over the last half second times the interval's length, the rate read from
    the machine's and this process's tick counters (two files, at most once
    per :attr:`window`): a per-step reading of every task (2 ms beside 3 ms
    steps) slowed a served tiny model's requests by a third, and even one such
    reading every half second left a 2 ms hole after which the next decode
    step ran 1.6–1.8 times its table time.  A serving sampler's slowdown is
    that of its latest canary: run when the engine is about to idle
    (:meth:`idle`, no request waiting for it) or, when it has not idled for a
    window, once between two steps — a host that slows the vCPU does so for
    seconds, so the latest canary tells the state of the steps around it.

    **Whose waiting counts.**  The waiting is that of this process's
    *working* threads: those that ran at least a quarter of the busiest
    thread's CPU time over the interval (the thread that ran the engine step,
    and intra-op worker threads when there are several).  A process of an
    in-process engine holds dozens of threads that wake briefly now and then;
    each wake-up waits some microseconds for a CPU, which summed over 40
    threads was 9 % of an 8.7 ms forward on an idle machine of this kind —
    their waiting did not delay the forward, so it is not counted.
    """

    precise: bool = True
    tick: float = attrs.field(factory=lambda: 1.0 / (os.sysconf("SC_CLK_TCK") or 100))
    #: the windowed foreign CPU of a serving sampler: others' CPU per second over the last window
    window: float = 0.5
    rate: float = 0.0
    last: tuple[float, int] | None = None
    #: time the CPU canary (:func:`canary`): a precise sampler's after each interval, a serving sampler's
    #: when the engine idles or once per window
    canary: bool = True
    #: the fastest canary run so far in this process
    best: float = float("inf")
    #: a serving sampler's latest canary: its slowdown and when it ran
    slowdown: float = 0.0
    canary_at: float = float("-inf")
    #: a precise sampler's earlier readings ``(at, others' CPU and stolen seconds)`` for its windowed foreign CPU
    history: list[tuple[float, float]] = attrs.field(factory=list)

    def _canary(self, settle: bool = True) -> float:
        """The canary after an interval; while it runs beyond the bound, again, for up to
        :data:`CANARY_SETTLE` seconds: a CPU that idled before a short interval still runs its first
        milliseconds of work slow (measured: the canary 45–55 % slow after a 5 ms prefill that followed a
        0.1 s idle, back within the bound some milliseconds later), a state the served engine shares and
        which ``fpm collect``'s prefill idle measures on purpose; a host that slows the vCPU does so for
        seconds, and the canary stays slow."""
        if not self.canary:
            return 0.0
        if self.best == float("inf"):  # a first best from a warm-up
            self.best = min(canary() for _ in range(CANARY_WARMUP))
        got = canary()
        deadline = time.monotonic() + CANARY_SETTLE
        while settle and got > self.best * (1 + MAX_SLOWDOWN) and time.monotonic() < deadline:
            got = canary()
        self.best = min(self.best, got)
        return got

    def _serving_canary(self, settle: bool) -> None:
        got = self._canary(settle) if not self.precise else 0.0
        if got:
            self.slowdown, self.canary_at = max(0.0, got / self.best - 1.0), time.monotonic()

    def idle(self) -> None:
        """A serving sampler's canary while its engine is about to idle (settled like a precise one's; at
        most once per :attr:`window`): it delays no served request."""
        if time.monotonic() - self.canary_at >= self.window:
            self._serving_canary(settle=True)

    def _others(self) -> int:
        return _others_cpu_ns() if self.precise else 0

    def _mine(self) -> dict[str, tuple[int, int]]:
        """This process's threads (precise), or only the calling thread (a serving sampler: one file).  The
        calling thread's CPU time is its clock's (``time.thread_time_ns``): the kernel adds a running thread's
        time to its ``schedstat`` only at scheduler ticks, so that a 2 ms step of a thread that never slept
        read 0 there."""
        tid = str(threading.get_native_id())
        if self.precise:
            out = _threads()
        else:
            got = _task_schedstat(f"/proc/self/task/{tid}/schedstat")
            out = {tid: got} if got is not None else {}
        if tid in out:
            out[tid] = (time.thread_time_ns(), out[tid][1])
        return out

    def _windowed_rate(self) -> float:
        """A serving sampler's view of the others: their CPU seconds per second (and stolen) over the last
        window, read from ``/proc/stat`` and ``/proc/self/stat`` (:func:`_foreign_ticks`) at most once per
        :attr:`window`."""
        now = time.monotonic()
        if self.last is None or now - self.last[0] >= self.window:
            other = _foreign_ticks()
            if self.last is not None:
                self.rate = max(0, other - self.last[1]) * self.tick / (now - self.last[0])
            self.last = (now, other)
            if now - self.canary_at >= self.window:  # the engine did not idle for a window: one quick canary
                self._serving_canary(settle=False)
        return self.rate

    def start(self) -> Reading:
        """The reading right before the interval (the other tasks first, this process's threads last)."""
        other = self._others()
        steal = _steal_ticks() if self.precise else 0
        return Reading(self._mine(), other, steal)

    def stop(self, start: Reading) -> Contention:
        """The contention of the interval since ``start`` (this process's threads first, then the canary)."""
        threads = self._mine()
        t_end = time.monotonic()
        steal = _steal_ticks() if self.precise else 0
        wall = max(0.0, t_end - start.at)
        if not self.precise:  # the others' CPU rate of the last window over this interval's length
            seen = self.between(start, Reading(threads, 0, steal))
            return attrs.evolve(seen, foreign_seconds=self._windowed_rate() * wall, slowdown=self.slowdown)
        probe = self._canary()
        end = Reading(threads, self._others(), steal)
        seen = attrs.evolve(self.between(start, end), foreign_seconds=self._window_rate(start, end) * wall)
        if not self.canary:
            return seen
        return attrs.evolve(seen, slowdown=max(0.0, probe / self.best - 1.0))

    def _foreign_total(self, reading: Reading) -> float:
        return reading.other_cpu_ns / 1e9 + reading.steal_ticks * self.tick

    def _window_rate(self, start: Reading, end: Reading) -> float:
        """A precise sampler's others' CPU per second (and stolen) over the window ending with ``end``: from the
        newest earlier reading at least :attr:`window` seconds old, or ``start`` when that is older (module
        docstring, *the bound*).  Readings are kept only as long as a window needs them."""
        self.history.append((start.at, self._foreign_total(start)))
        cut = min(start.at, end.at - self.window)
        older = [i for i, (at, _) in enumerate(self.history) if at <= cut]
        ref = older[-1] if older else 0
        del self.history[:ref]
        at, total = self.history[0]
        span = end.at - at
        return max(0.0, self._foreign_total(end) - total) / span if span > 0 else 0.0

    def between(self, a: Reading, b: Reading) -> Contention:
        """The contention of the interval from reading ``a`` to reading ``b``."""
        deltas = [(b.threads[t][0] - a.threads[t][0], b.threads[t][1] - a.threads[t][1])
                  for t in b.threads if t in a.threads]  # fmt: skip
        cpu_ns = sum(max(0, c) for c, _ in deltas)
        busiest = max((c for c, _ in deltas), default=0)
        wait_ns = sum(max(0, w) for c, w in deltas if busiest > 0 and c >= WORKING_SHARE * busiest)
        cpu, wait = cpu_ns / 1e9, wait_ns / 1e9
        steal = max(0, b.steal_ticks - a.steal_ticks) * self.tick
        foreign = max(0, b.other_cpu_ns - a.other_cpu_ns) / 1e9  # a serving sampler's comes from :meth:`stop`
        return Contention(cpu, wait, foreign + steal)


def sampler(*, precise: bool = True) -> Sampler | None:
    """A :class:`Sampler`, or ``None`` where this process's thread counters cannot be read (not Linux)."""
    if _task_schedstat(f"/proc/self/task/{os.getpid()}/schedstat") is None:
        return None
    return Sampler(precise=precise)
