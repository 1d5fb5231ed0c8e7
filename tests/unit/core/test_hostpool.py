"""Host work made ahead in worker processes (core/hostpool.py, RunCache.in_processes): the
same bits as made in place, a worker's error named with its job, no CuPy in a worker, a job
no worker picked up made in place, nothing left once closed (a running job stopped), a
killed session's directory removed by the next, nothing started without a GPU."""
from __future__ import annotations

import dataclasses
import os
import time
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gpuchar import schedule
from pytest_gpuchar.core import hostpool
from pytest_gpuchar.core.topic import RunCache
from pytest_gpuchar.results.expectations import Store
from pytest_gpuchar.topics import registry
from pytest_gpuchar.topics.bsp import rows as bsp_rows


@pytest.fixture(scope="module")
def runs():
    r = RunCache()
    yield r
    r.close()


def _same(a, b) -> bool:
    """Equal bit for bit (arrays by dtype, shape and bytes), through tuples, lists, dicts
    and dataclasses."""
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and a.tobytes() == b.tobytes())
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    return type(a) is type(b) and (a == b or (a != a and b != b))


def test_the_topics_jobs_made_in_a_worker_are_the_in_place_values(runs):
    session = SimpleNamespace(expectations=Store(), device=SimpleNamespace(name="NVIDIA H200"))
    jobs = registry.host_ahead(["bsp", "numerics"], session, "sm_90")
    kinds = {key[:2] for key, _, _ in jobs}
    assert kinds == {("bsp", "host"), ("numerics", "chain_inputs"),
                     ("numerics", "fp8_k_case"), ("numerics", "fp8_k_models")}
    assert [k for k, _, _ in jobs if k[1] == "fp8_k_models"] == [
        ("numerics", "fp8_k_models", t, 14.0) for t in ("e4m3", "e5m2")]    # H200's bits
    small = {("bsp", "host", "hotspot-512x512"), ("bsp", "host", "knn-42764"),
             ("bsp", "host", "mm-320x320x640")}
    picked = [j for j in jobs if j[0] in small or (j[0][1] == "chain_inputs" and
                                                   j[0][2].in_type == "tf32")
              or (j[0][1] == "fp8_k_case" and j[0][3] in (32, 256))]
    assert len(picked) == 3 + 2 + 4
    runs.in_processes(picked)
    for key, fn, args in picked:
        made = runs.once(key, lambda: pytest.fail(f"{key} made in place"))
        assert _same(made, fn(*args)), key


def test_a_worker_error_names_its_job_and_cupy_is_not_there(runs):
    import importlib
    import math
    runs.in_processes([(("t", "sqrt"), math.sqrt, (-1.0,)),
                       (("t", "cupy"), importlib.import_module, ("cupy",))])
    for key in (("t", "sqrt"), ("t", "cupy")):
        while not runs._runs[key].future.done():     # taken from a worker, not made here
            time.sleep(0.01)
    with pytest.raises(hostpool.HostWorkFailed, match=r"\('t', 'sqrt'\).*ValueError"):
        runs.once(("t", "sqrt"), lambda: 0.0)
    with pytest.raises(hostpool.HostWorkFailed, match=r"\('t', 'cupy'\).*import of cupy halted"):
        runs.once(("t", "cupy"), lambda: None)
    assert ("t", "sqrt") not in runs          # asked again, made again


def test_a_job_no_worker_picked_up_is_made_in_place():
    r = RunCache()
    r._processes = hostpool.HostPool(1)
    try:
        # one worker: two sleeps hold it and the call queue; the third job waits unpicked
        r.in_processes([(("sleep", i), time.sleep, (1.0,)) for i in range(2)] +
                       [(("late",), max, (1, 2))])
        t = time.monotonic()
        assert r.once(("late",), lambda: "here") == "here"
        assert time.monotonic() - t < 0.5
    finally:
        r.close()


def test_closed_nothing_is_left():
    pool = hostpool.HostPool(1)
    made = pool.submit(np.arange, 1000).result()
    spill, procs = pool.spill, list(pool.pool._processes.values())
    assert made[1] and os.path.dirname(made[1]) == spill      # an array travels in a file
    assert _same(hostpool.load(made), np.arange(1000)) and not os.path.exists(made[1])
    pool.submit(np.arange, 10)                                  # made, never taken
    pool.close()
    assert not os.path.exists(spill) and not any(p.is_alive() for p in procs)


def test_close_stops_a_running_job():
    """The session's end does not wait for a job still running (nothing will take it): the
    worker is stopped, its directory removed."""
    pool = hostpool.HostPool(1)
    pool.submit(np.arange, 10).result()              # the worker is up
    procs = list(pool.pool._processes.values())
    running = pool.submit(time.sleep, 30.0)
    while not running.running():
        time.sleep(0.01)
    t = time.monotonic()
    pool.close()
    assert time.monotonic() - t < 10
    assert not os.path.exists(pool.spill) and not any(p.is_alive() for p in procs)


def test_a_killed_sessions_directory_is_removed_by_the_next(tmp_path):
    """A session killed before its end leaves its directory: the next session's pool
    removes it, and keeps a live session's."""
    import subprocess
    import sys
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = tmp_path / f"{hostpool.PREFIX}{int(ended.stdout)}-abc"
    live = tmp_path / f"{hostpool.PREFIX}{os.getpid()}-def"
    other = tmp_path / "gpuchar-host-notapid"
    for d in (dead, live, other):
        d.mkdir()
        (d / "job-1-0").write_bytes(b"x" * 10)
    assert hostpool.remove_stale(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and live.exists() and other.exists()


def test_arrays_travel_in_the_pickle_where_no_file_can_be_written(tmp_path):
    full = tmp_path / "no-such-directory"            # as a full /dev/shm: OSError
    made = hostpool._call(str(full), np.arange, (10,))
    assert made[1] is None and _same(hostpool.load(made), np.arange(10))


def test_without_a_gpu_nothing_is_started():
    g = SimpleNamespace(is_worker=False, runs=RunCache(), device=None,
                        builds=SimpleNamespace(offline_groups=lambda *a, **k: None,
                                               later=lambda queue: queue()),
                        not_measuring="")
    item = SimpleNamespace(get_closest_marker=lambda name: SimpleNamespace(args=("bsp",))
                           if name in ("hardware", "topic") else None,
                           callspec=SimpleNamespace(params={"arch": "sm_90"}))
    schedule.start(g, [item], ["sm_90"], ("static", "hardware"))
    assert g.runs._processes is None and bsp_rows.SIZES


def test_on_a_gpu_the_first_job_goes_to_a_host_thread_the_rest_to_the_workers():
    """The run's first test asks for the first job at once: no worker is up to make it, so
    it is started on a host thread (beside the links and the rest of the queueing) and
    taken from there, the same value as made in place; every later job is started in the
    workers."""
    runs = RunCache()
    g = SimpleNamespace(is_worker=False, runs=runs, not_measuring="",
                        expectations=Store(), device=SimpleNamespace(
                            arch="sm_90", name="NVIDIA H200", cuda_driver_api="13.0"),
                        builds=SimpleNamespace(offline_groups=lambda *a, **k: None,
                                               later=lambda queue: queue(),
                                               prefetch=lambda *a, **k: None,
                                               prefetch_modules=lambda *a, **k: None))
    item = SimpleNamespace(get_closest_marker=lambda name: SimpleNamespace(args=("bsp",))
                           if name in ("hardware", "topic") else None,
                           callspec=SimpleNamespace(params={"arch": "sm_90"}))
    try:
        schedule.start(g, [item], ["sm_90"], ("hardware",))
        (first, fn, args), *later = registry.host_ahead(["bsp"], g, "sm_90")
        assert first == ("bsp", "host", bsp_rows.SIZES[0].id)
        assert first in runs and not runs._runs[first].process
        assert later and all(runs._runs[k].process for k, _, _ in later)
        taken = runs.take(first, lambda: pytest.fail("the first job made again in place"))
        assert _same(taken, fn(*args))
    finally:
        runs.close()
