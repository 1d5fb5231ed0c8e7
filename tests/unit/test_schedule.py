"""The compile scheduling (pytest_gpuchar/schedule.py) on stand-in items: when the run's
compiles start, how often, and the hardware-first order on a GPU."""
from __future__ import annotations

from types import SimpleNamespace

from pytest_gpuchar import schedule
from pytest_gpuchar.core.topic import RunCache


class Item(SimpleNamespace):
    def get_closest_marker(self, name):
        return self.marks.get(name)


def item(topic, arch, kind="static", session=None):
    marks = {kind: SimpleNamespace(args=())}
    if topic:
        marks["topic"] = SimpleNamespace(args=(topic,))
    return Item(marks=marks, callspec=SimpleNamespace(params={"arch": arch}) if arch else None,
                session=session, name=f"{topic}-{arch}-{kind}")


def gpuchar(worker=False, dev=None, archs=("sm_80",)):
    return SimpleNamespace(is_worker=worker, runs=RunCache(), device=dev,
                           archs=lambda: list(archs))


def test_the_compiles_start_once_at_the_first_characterisation_test(monkeypatch):
    started = []
    monkeypatch.setattr(schedule, "start", lambda g, items, archs, kinds:
                        started.append((archs, kinds)))
    session = SimpleNamespace(items=[])
    g = gpuchar()
    schedule.before_test(g, item(None, "sm_80", session=session))     # a unit test with an arch
    schedule.before_test(g, item("memory", None, session=session))    # no arch
    assert started == []
    for _ in range(3):
        schedule.before_test(g, item("memory", "sm_80", session=session))
    assert started == [(["sm_80"], ("static", "hardware"))]


def test_a_worker_starts_per_arch_and_kind(monkeypatch):
    started = []
    monkeypatch.setattr(schedule, "start", lambda g, items, archs, kinds:
                        started.append((archs, kinds)))
    session = SimpleNamespace(items=[])
    g = gpuchar(worker=True)
    for arch, kind in [("sm_80", "static"), ("sm_80", "static"), ("sm_90", "static"),
                       ("sm_90", "hardware")]:
        schedule.before_test(g, item("tensor", arch, kind, session))
    assert started == [(["sm_80"], ("static",)), (["sm_90"], ("static",)),
                       (["sm_90"], ("hardware",))]


def test_on_a_gpu_hardware_tests_run_first():
    items = [item("memory", "sm_90"), item("memory", "sm_90", "hardware"),
             item("dpx", "sm_90"), item("dpx", "sm_90", "hardware")]
    config = SimpleNamespace(getoption=lambda name, default=None: default)
    schedule.hardware_first(gpuchar(archs=("sm_80",)), config, items)   # no GPU: unchanged
    assert [i.name for i in items][0] == "memory-sm_90-static"
    gpu = SimpleNamespace(arch="sm_90")
    schedule.hardware_first(gpuchar(dev=gpu, archs=("sm_90",)), config, items)
    assert [i.name for i in items] == ["memory-sm_90-hardware", "dpx-sm_90-hardware",
                                       "memory-sm_90-static", "dpx-sm_90-static"]


def test_a_few_tests_of_a_large_group_compile_alone():
    group = SimpleNamespace(probes=list(range(80)))
    assert schedule.worth_batching(group, 10) and not schedule.worth_batching(group, 9)


def test_the_offline_assemblies_are_queued_on_the_builds_thread(monkeypatch):
    """start() returns before the static groups are built (about a second of the test
    thread before a GPU run's first test): they are built and queued on the builds'
    queueing thread, in the run's order, which Builds.offline waits for."""
    import threading

    from pytest_gpuchar.core.build import Builds
    b = Builds()
    go, seen = threading.Event(), []

    def offline_groups(groups, *, wait=True, **kw):
        go.wait(10)
        seen.append((threading.current_thread().name.split("_")[0],
                     sorted({(g.name.split("/")[0], g.arch) for g in groups}), wait))
    monkeypatch.setattr(b, "offline_groups", offline_groups)
    g = gpuchar(archs=("sm_80", "sm_90"))
    g.builds = b
    items = [item("dpx", arch) for arch in ("sm_90", "sm_80") for _ in range(200)]
    schedule.start(g, items, ["sm_80", "sm_90"], ("static",))
    assert seen == []
    go.set()
    b._queueing_done()          # as Builds.offline does: let it go, wait for it
    ((thread, groups, wait),) = seen
    assert thread == "gpuchar-queue" and wait is False
    assert {arch for _, arch in groups} == {"sm_80", "sm_90"}
    b.close()
