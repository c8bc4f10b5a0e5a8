"""What the machine did to a timed interval: the engine's own CPU time, its waits for a CPU, and others' CPU time.

A forward timed on a shared machine measures the engine *and* whatever else
ran beside it.  Every timed interval of ``fpm collect`` (each measured forward)
and of ``fpm verify`` (each served step) therefore records, besides its wall
time, a :class:`Contention`:

``cpu_seconds``
    CPU time of every thread of this process (the in-process engine's
    threads) during the interval.
``wait_seconds``
    Time those threads were **runnable but waiting for a CPU** (the
    scheduler's run delay).
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
after) or, for long serving runs where a reading per step would perturb the
engine, from ``/proc/stat``'s busy and steal ticks minus the own CPU time
(10 ms resolution, good over windows of a second).  ``getrusage(RUSAGE_THREAD)``
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

**The bound** (:class:`ContentionBound`): a sample is *contended* when its
waiting exceeds 5 % of its wall time, or when others used more than 10 % of
a CPU over it.  On an idle machine of this kind both stay under 3 % (the
system's own daemons); a neighbour using one tenth of a CPU can move a
forward by up to the machine's own step-to-step noise (a few per cent), so
the bound flags exactly the samples a neighbour could have moved beyond
that noise.  Both fractions are of the interval's wall time.

Where ``/proc/self/task/*/schedstat`` cannot be read (not Linux), no
:class:`Sampler` exists (:func:`sampler` returns ``None``) and the intervals
record no contention; ``fpm validate`` then refuses the run (a measurement
that cannot show it was clean is not a clean measurement).
"""

from __future__ import annotations

import os
from typing import Any

import attrs

#: Fractions of an interval's wall time above which it is contended (module docstring).
MAX_WAIT_FRACTION = 0.05
MAX_FOREIGN_FRACTION = 0.10
#: How the figures were read, recorded beside them.
METHOD_PRECISE = "proc_task_schedstat"
METHOD_COARSE = "proc_self_schedstat_and_proc_stat"


@attrs.frozen
class Contention:
    """What the machine did to one timed interval (module docstring), in seconds."""

    cpu_seconds: float
    wait_seconds: float
    foreign_seconds: float

    def as_json(self) -> dict[str, float]:
        return {"cpu_seconds": self.cpu_seconds, "wait_seconds": self.wait_seconds,
                "foreign_seconds": self.foreign_seconds}  # fmt: skip

    @classmethod
    def from_json(cls, value: Any) -> Contention | None:
        """The contention of a record, or ``None`` when it is not three numbers ≥ 0."""
        if not isinstance(value, dict):
            return None
        got: list[Any] = [value.get(k) for k in ("cpu_seconds", "wait_seconds", "foreign_seconds")]
        if not all(type(v) in (int, float) and v >= 0 and v == v and v != float("inf") for v in got):
            return None
        return cls(*(float(v) for v in got))

    def __add__(self, other: Contention) -> Contention:
        return Contention(self.cpu_seconds + other.cpu_seconds, self.wait_seconds + other.wait_seconds,
                          self.foreign_seconds + other.foreign_seconds)  # fmt: skip


@attrs.frozen
class ContentionBound:
    """When an interval counts as contended (module docstring: the 5 % / 10 % bound)."""

    max_wait_fraction: float = MAX_WAIT_FRACTION
    max_foreign_fraction: float = MAX_FOREIGN_FRACTION

    def contended(self, contention: Contention | None, wall: float) -> bool:
        """Whether an interval of ``wall`` seconds with ``contention`` is contended (unmeasured: it is)."""
        if contention is None:
            return True
        wall = max(wall, 1e-9)
        return (contention.wait_seconds > self.max_wait_fraction * wall
                or contention.foreign_seconds > self.max_foreign_fraction * wall)  # fmt: skip

    def describe(self, contention: Contention | None, wall: float) -> str:
        """``wait 12% foreign 80% of 0.031 s`` — how contended an interval was, for diagnostics."""
        if contention is None:
            return "contention unmeasured"
        wall = max(wall, 1e-9)
        return (f"wait {contention.wait_seconds / wall:.0%} foreign {contention.foreign_seconds / wall:.0%} "
                f"of {wall:.3g} s")  # fmt: skip

    def as_json(self) -> dict[str, float]:
        return {"max_wait_fraction": self.max_wait_fraction, "max_foreign_fraction": self.max_foreign_fraction}

    @classmethod
    def from_json(cls, value: Any) -> ContentionBound | None:
        if not isinstance(value, dict):
            return None
        a: Any = value.get("max_wait_fraction")
        b: Any = value.get("max_foreign_fraction")
        if not all(type(v) in (int, float) and 0 < v <= 1 for v in (a, b)):
            return None
        return cls(float(a), float(b))


@attrs.frozen
class Reading:
    """One reading of the counters: nanoseconds, and the ``/proc/stat`` ticks (coarse mode)."""

    own_cpu_ns: int
    own_wait_ns: int
    other_cpu_ns: int
    busy_ticks: int = 0
    steal_ticks: int = 0


def _task_schedstat(path: str) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            parts = f.read().split()
        return int(parts[0]), int(parts[1])
    except (OSError, ValueError, IndexError):
        return None


def _own(pid: str = "self") -> tuple[int, int]:
    cpu = wait = 0
    base = f"/proc/{pid}/task"
    try:
        tasks = os.listdir(base)
    except OSError:
        return 0, 0
    for t in tasks:
        got = _task_schedstat(f"{base}/{t}/schedstat")
        if got is not None:
            cpu += got[0]
            wait += got[1]
    return cpu, wait


def _proc_stat() -> tuple[int, int]:
    """Busy ticks (user, nice, system, irq, softirq) and steal ticks of all CPUs."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()[1:]
        v = [int(x) for x in fields[:8]] + [0] * max(0, 8 - len(fields))
    except (OSError, ValueError):
        return 0, 0
    user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
    return user + nice + system + irq + softirq, steal


@attrs.define
class Sampler:
    """Reads the counters of the module docstring.

    ``precise``: the foreign CPU from every task's ``schedstat`` (about 2 ms
    a reading; ``fpm collect``); otherwise from ``/proc/stat`` ticks (``fpm
    verify``'s per-step readings, which must not slow the served engine).
    """

    precise: bool = True
    tick: float = attrs.field(factory=lambda: 1.0 / (os.sysconf("SC_CLK_TCK") or 100))

    def read(self) -> Reading:
        own_cpu, own_wait = _own()
        busy, steal = _proc_stat()
        other = 0
        if self.precise:
            me = str(os.getpid())
            for name in os.listdir("/proc"):
                if name.isdigit() and name != me:
                    other += _own(name)[0]
        return Reading(own_cpu, own_wait, other, busy, steal)

    def between(self, a: Reading, b: Reading) -> Contention:
        """The contention of the interval from reading ``a`` to reading ``b``."""
        cpu = max(0, b.own_cpu_ns - a.own_cpu_ns) / 1e9
        wait = max(0, b.own_wait_ns - a.own_wait_ns) / 1e9
        steal = max(0, b.steal_ticks - a.steal_ticks) * self.tick
        if self.precise:
            foreign = max(0, b.other_cpu_ns - a.other_cpu_ns) / 1e9
        else:
            foreign = max(0.0, max(0, b.busy_ticks - a.busy_ticks) * self.tick - cpu)
        return Contention(cpu, wait, foreign + steal)


def sampler(*, precise: bool = True) -> Sampler | None:
    """A :class:`Sampler`, or ``None`` where this process's thread counters cannot be read (not Linux)."""
    if _task_schedstat(f"/proc/self/task/{os.getpid()}/schedstat") is None:
        return None
    return Sampler(precise=precise)
