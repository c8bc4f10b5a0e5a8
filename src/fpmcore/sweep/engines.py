"""Where the tasks of a sweep run: in this process, in a local process pool, or on Ray.

Every engine runs :func:`fpmcore.sweep.runner.run_task` on each task and
yields its outcome as soon as it finishes (in finishing order, not task
order).  The parsed inputs travel once per worker, not once per task: the
pool's initializer receives them, and Ray tasks get one object-store
reference that each worker resolves once.

``serial``
    in this process, one task after another (``--debug`` friendly).
``local`` (the default)
    a :class:`concurrent.futures.ProcessPoolExecutor` of ``workers``
    processes (default: one per core), started with ``spawn`` so that no
    thread or lock of the parent is inherited (a script that calls
    :func:`run_tasks` with this engine needs the ``if __name__ == "__main__":``
    guard, as every ``spawn`` user does).  At most ``4 × workers``
    tasks are in flight.  When a worker process dies, the tasks in flight are
    reported as *lost* (``"lost": True``): they get no row, and ``--resume``
    runs them again.
``ray``
    the same tasks as Ray tasks (``ray.init(address=...)``; a local Ray
    instance with ``workers`` CPUs when no address is given), in batches of up
    to 16 tasks per Ray call (:func:`ray_batch_size`) so that Ray's cost per
    call (about 3 ms here) is shared.  Ray is the
    optional extra ``fpmcore[ray]`` and is imported only here.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from fpmcore.documents.errors import FpmError
from fpmcore.sweep.grid import Sweep, Task
from fpmcore.sweep.runner import run_task, set_inputs

ENGINES = ("local", "ray", "serial")


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def _values(sweep: Sweep) -> dict[str, Any]:
    return {digest: item.value for digest, item in sweep.inputs.items()}


def run_serial(sweep: Sweep, tasks: Sequence[Task]) -> Iterator[dict[str, Any]]:
    """Each task in this process, in order."""
    set_inputs(_values(sweep))
    for task in tasks:
        yield run_task(task)


def _lost(task: Task, why: str) -> dict[str, Any]:
    return {"task": task.index, "summary": None, "error": {"rule": "sweep", "message": why}, "lost": True}


def run_local(sweep: Sweep, tasks: Sequence[Task], workers: int) -> Iterator[dict[str, Any]]:
    """The tasks on a pool of ``workers`` local processes, as they finish."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    if not tasks:
        return
    window = 4 * workers
    todo = iter(tasks)
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
        initializer=set_inputs, initargs=(_values(sweep),),
    )  # fmt: skip
    try:
        running: dict[Any, Task] = {}
        exhausted = False
        while True:
            while not exhausted and len(running) < window:
                task = next(todo, None)
                if task is None:
                    exhausted = True
                    break
                try:
                    running[pool.submit(run_task, task)] = task
                except BrokenProcessPool as exc:  # the pool broke before this task went in: it and the rest are lost
                    for t in [task, *todo]:
                        yield _lost(t, f"a worker process died ({exc}); --resume runs this task again")
                    exhausted = True
                    break
            if not running:
                return
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                task = running.pop(future)
                try:
                    yield future.result()
                except BrokenProcessPool as exc:
                    yield _lost(task, f"a worker process died ({exc}); --resume runs this task again")
                except Exception as exc:  # pickling and the like: report, keep the others
                    yield {"task": task.index, "summary": None,
                           "error": {"rule": "internal", "message": f"{type(exc).__name__}: {exc}"}}  # fmt: skip
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise FpmError(
            "sweep", "--engine ray needs Ray, which is not installed; install the extra: pip install 'fpmcore[ray]'"
        ) from None
    return ray


#: The sweep whose inputs this Ray worker holds.
_RAY_LOADED: list[str] = []


def _ray_batch(tasks: list[Task], sweep_id: str, refs: list[Any]) -> list[dict[str, Any]]:
    """Body of one Ray task: resolve the inputs once per worker and sweep, then run a batch of tasks."""
    if _RAY_LOADED != [sweep_id]:
        import ray

        set_inputs(ray.get(refs[0]))
        _RAY_LOADED[:] = [sweep_id]
    return [run_task(task) for task in tasks]


def ray_batch_size(tasks: int, cpus: int) -> int:
    """Tasks per Ray task: about 8 batches per CPU, at most 16 tasks, so that Ray's per-call cost is shared."""
    return max(1, min(16, tasks // (8 * max(cpus, 1))))


def run_ray(sweep: Sweep, tasks: Sequence[Task], workers: int | None, address: str | None) -> Iterator[dict[str, Any]]:
    """The tasks as Ray tasks (in small batches), as they finish."""
    ray = _import_ray()
    if not tasks:
        return
    started = not ray.is_initialized()
    if started:
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
        if address is None:
            options["num_cpus"] = workers or default_workers()
        try:
            ray.init(address=address, **options)
        except Exception as exc:
            raise FpmError("sweep", f"cannot start or reach Ray at {address or 'a local instance'}: {exc}") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_batch)
        refs = [ray.put(_values(sweep))]
        sweep_id = uuid.uuid4().hex
        cpus = int(ray.cluster_resources().get("CPU", 1))
        size = ray_batch_size(len(tasks), cpus)
        batches = iter([list(tasks[i : i + size]) for i in range(0, len(tasks), size)])
        window = 2 * max(cpus, 1)
        running: dict[Any, list[Task]] = {}
        exhausted = False
        while True:
            while not exhausted and len(running) < window:
                batch = next(batches, None)
                if batch is None:
                    exhausted = True
                    break
                running[remote.remote(batch, sweep_id, refs)] = batch
            if not running:
                return
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                batch = running.pop(ref)
                try:
                    outcomes = ray.get(ref)
                except Exception as exc:  # the worker died or the cluster went away
                    why = f"the Ray task failed ({type(exc).__name__}); --resume runs this task again"
                    outcomes = [_lost(task, why) for task in batch]
                yield from outcomes
    finally:
        if started:
            ray.shutdown()


def run_tasks(
    sweep: Sweep, tasks: Sequence[Task], *, engine: str = "local", workers: int | None = None,
    address: str | None = None,
) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Outcomes of ``tasks`` on ``engine`` (``local``, ``ray`` or ``serial``), as they finish."""
    if engine == "serial":
        return run_serial(sweep, tasks)
    if engine == "local":
        return run_local(sweep, tasks, workers or default_workers())
    if engine == "ray":
        return run_ray(sweep, tasks, workers, address)
    raise FpmError("sweep", f"unknown engine {engine!r}; engines are: {', '.join(ENGINES)}")


__all__ = ["ENGINES", "default_workers", "ray_batch_size", "run_local", "run_ray", "run_serial", "run_tasks"]
