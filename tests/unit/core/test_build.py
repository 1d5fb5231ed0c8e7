"""The compile stage: groups in parts, offline batches equal to probes assembled alone, the
session's caches (no GPU needed; ptxas/nvdisasm from the static extra, else skipped)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import build, jit, toolchain
from pytest_gpuchar.topics.instructions import kernels, rows


def _probes(arch: str, names: list[str]):
    return [kernels.latency_probe(rows.row(r), arch) for r in names]


def test_every_probe_of_an_arch_has_unique_kernel_names():
    from pytest_gpuchar.topics.instructions import run
    names = [e for p in run.suite_probes("sm_90") for e in p.entries.values()]
    assert len(names) == len(set(names))


def test_group_parts_deal_probes_and_name_modules(monkeypatch):
    monkeypatch.setattr(jit, "chunk_count", lambda: 2)
    ps = _probes("sm_80", ["add.u32", "fma.rn.f32", "mul.lo.u32"])
    whole = build.Group("batch", "sm_80", ps).parts()
    assert [(len(p), n) for p, _, n in whole] == [(3, "gpuchar_batch.ptx")]
    split = build.Group("batch", "sm_80", ps, split=True).parts()
    assert [(len(p), n) for p, _, n in split] == [(2, "gpuchar_batch0.ptx"),
                                                  (1, "gpuchar_batch1.ptx")]
    assert all(t.startswith(ps[0].header) for _, t, _ in split)
    assert build.Group("empty", "sm_80", []).parts() == []


def test_offline_module_is_assembled_once(need_offline_tools):
    need_offline_tools("sm_80")
    b = build.Builds()
    text = _probes("sm_80", ["add.u32"])[0].ptx
    assert b.offline_module("sm_80", text)[1] is b.offline_module("sm_80", text)[1]


def test_batch_gives_the_same_sass_as_assembling_alone(monkeypatch, need_offline_tools):
    """A group split into parts (one ptxas + nvdisasm process each, in parallel) remembers
    every probe with the SASS it has when assembled alone."""
    need_offline_tools("sm_86")
    monkeypatch.setattr(jit, "chunk_count", lambda: 3)
    ps = _probes("sm_86", ["add.u32", "fma.rn.f32", "mul.lo.u32", "add.f32", "mad.lo.u32"])
    batched = build.Builds()
    batched.offline_groups([build.Group("t", "sm_86", ps, split=True)])
    alone = build.Builds()
    for p in ps:
        a, b = alone.offline_module("sm_86", p.ptx)[1], batched.offline(p).functions
        assert p.snapshot_text(b) == p.snapshot_text(a)
        assert p.check(b).ok


def test_a_batch_for_a_named_cuda_version_uses_that_ptxas(monkeypatch):
    """A hardware run compares the driver's SASS with the ptxas of the driver's CUDA version:
    that ptxas assembles the group's parts (not the preferred ptxas, not one run per probe)."""
    try:
        older = toolchain.find("ptxas", "sm_80", "12.4")
        toolchain.find("nvdisasm", "sm_80")
    except toolchain.ToolMissing as e:
        pytest.skip(str(e))
    assert older.version != toolchain.find("ptxas", "sm_80").version
    calls = []
    real = toolchain.assemble

    def spy(ptx, arch, *, tool=None, name="probe", **kw):
        calls.append((tool.version if tool else None, name))
        return real(ptx, arch, tool=tool, name=name, **kw)
    monkeypatch.setattr(toolchain, "assemble", spy)
    ps = _probes("sm_80", ["add.u32", "fma.rn.f32", "mul.lo.u32"])
    b = build.Builds()
    b.offline_groups([build.Group("batch", "sm_80", ps)], version="12.4")
    assert calls == [(older.version, "gpuchar_batch.ptx")]
    built = [b.offline(p, older) for p in ps]
    assert len(calls) == 1 and all(x.tool == older and p.check(x.functions).ok
                                   for p, x in zip(ps, built))


def test_a_part_that_fails_to_assemble_leaves_its_probes_to_be_built_alone(monkeypatch,
                                                                           need_offline_tools):
    need_offline_tools("sm_80")
    ps = _probes("sm_80", ["add.u32"])
    b = build.Builds()
    bad = build.Group("t", "sm_80", ps, text=lambda part: part[0].header + "garbage;\n")
    b.offline_groups([bad])
    assert b.offline(ps[0]).functions       # assembled alone now
    with pytest.raises(toolchain.AssemblyError):
        b.offline_module("sm_80", ps[0].header + "garbage;\n")


def test_chunks_deal_round_robin_and_never_empty():
    assert jit.chunks(list(range(7)), 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert jit.chunks([1, 2], 8) == [[1], [2]]
    assert jit.chunks([1, 2, 3], 1) == [[1, 2, 3]]
    assert 1 <= jit.chunk_count() <= 8


def _job(arch, tool, n, version="8.0", target=None, name=None):
    text = (f".version {version}\n.target {target or arch}\n.address_size 64\n\n"
            f".visible .entry k{n}() {{ ret; }}\n")
    return (arch, tool, [f"probe{n}"], text, name or f"part{n}.ptx")


def test_static_parts_merge_per_arch_compiler_and_target():
    """nvdisasm's cost per cubin: one module per (arch, ptxas, .target), the highest ISA
    version, the parts' kernels in order; each merged job keeps its parts."""
    tool = toolchain.Tool("ptxas", "/x/ptxas", "13.5.37", "wheel")
    jobs = [_job("sm_90", tool, 0), _job("sm_90", tool, 1, version="8.4"),
            _job("sm_90a", tool, 2, target="sm_90a"), _job("sm_80", tool, 3, version="7.1"),
            _job("sm_90", tool, 4, version="8.0"), _job("sm_90a", tool, 5, target="sm_90a")]
    out = build.merge_jobs(jobs)
    assert [(j[0], j[2]) for j in out] == [("sm_90", ["probe0", "probe1", "probe4"]),
                                           ("sm_90a", ["probe2", "probe5"]),
                                           ("sm_80", ["probe3"])]
    sm90 = out[0]
    assert sm90[3].startswith(".version 8.4\n.target sm_90\n.address_size 64\n")
    assert sm90[3].count(".visible .entry") == 3 and sm90[3].count(".version") == 1
    assert [p[0] for p in sm90[5]] == [["probe0"], ["probe1"], ["probe4"]]
    assert out[2] == jobs[3]          # alone: unchanged


def test_a_merged_module_that_fails_assembles_its_parts(monkeypatch):
    tool = toolchain.Tool("ptxas", "/x/ptxas", "13.5.37", "wheel")
    from types import SimpleNamespace
    jobs = [_job("sm_90", tool, 0), _job("sm_90", tool, 1)]
    for j in jobs:
        j[2][0] = SimpleNamespace(entries={1: "k"}, digest=j[4])
    merged = build.merge_jobs(jobs)[0]
    seen = []

    def offline_module(self, arch, text, name="module", tool=None):
        seen.append(name)
        if "merged" in name:
            raise toolchain.AssemblyError("duplicate symbol")
        return tool, {"k": name}

    monkeypatch.setattr(build.Builds, "offline_module", offline_module)
    b = build.Builds()
    b._build_part(*merged)
    assert seen == ["gpuchar_sm_90_merged.ptx", "part0.ptx", "part1.ptx"]
    assert b._offline_probe[("sm_90", "13.5.37", "part1.ptx")] == {"k": "part1.ptx"}


def test_prefetched_modules_are_disassembled_in_the_background(monkeypatch,
                                                                need_offline_tools):
    """nvdisasm of a prefetched driver-JIT module runs once the link is done, off the test
    thread; jit_module takes that SASS (a failed background link: disassembled in place)."""
    import threading
    import types
    from concurrent.futures import Future
    need_offline_tools("sm_80")
    ps = _probes("sm_80", ["add.u32", "fma.rn.f32"])
    group = build.Group("batch", "sm_80", ps)
    (part, text, name), = group.parts()
    cubin = toolchain.assemble(text, "sm_80", name=name)

    class Cache(jit.JitCache):
        def prefetch(self, modules, driver):
            for ptx, _ in modules:
                fut = Future()
                fut.set_result((cubin, ""))
                key = jit.module_key(ptx, driver)
                self._pending[key] = self._links[key] = fut

        def compile(self, ptx, driver, name="probe.ptx"):
            return types.SimpleNamespace(cubin=self._pending.pop(jit.module_key(ptx, driver))
                                         .result()[0], info_log="")
    where = []
    real = build.functions_of
    monkeypatch.setattr(build, "functions_of",
                        lambda c, a: where.append(threading.current_thread().name) or real(c, a))
    dev = types.SimpleNamespace(arch="sm_80", driver="580")
    b = build.Builds(Cache())
    b.prefetch(dev, [group])
    compiled, funcs = b.jit_module(dev, text, name)
    b.close()
    assert where and all(w.startswith("gpuchar-nvdisasm") for w in where)
    assert compiled.cubin == cubin and all(p.check(funcs).ok for p in ps)


def test_offline_waits_for_the_queueing_handed_to_its_thread(need_offline_tools):
    """`later` runs the queueing (building groups, `offline_groups(wait=False)`) on a
    thread of its own once `go` is called (a GPU run's first long wait); a probe looked up
    before calls it and waits, and comes from its group's module (one ptxas run for the
    group), not assembled alone."""
    need_offline_tools("sm_80")
    import threading
    import time
    ps = _probes("sm_80", ["add.u32", "fma.rn.f32", "mul.lo.u32"])
    b = build.Builds()
    threads = []

    def queue():
        threads.append(threading.current_thread().name)
        b.offline_groups([build.Group("batch", "sm_80", ps)], wait=False)
    b.later(queue)
    time.sleep(0.1)
    assert threads == [] and not b._offline_pending       # waiting for `go`
    built = [b.offline(p) for p in ps]
    assert len(threads) == 1 and threads[0].startswith("gpuchar-queue")
    assert b.assembled == 1 and all(p.check(x.functions).ok for p, x in zip(ps, built))
    b.close()


def test_an_error_of_the_queueing_is_raised_once_then_probes_are_built_alone(
        need_offline_tools):
    need_offline_tools("sm_80")
    (p,) = _probes("sm_80", ["add.u32"])
    b = build.Builds()

    def queue():
        raise ValueError("row add.u32: no such operand")
    b.later(queue)
    with pytest.raises(ValueError, match="no such operand"):
        b.offline(p)
    assert p.check(b.offline(p).functions).ok and b.assembled == 1


def test_close_lets_a_running_queueing_finish_and_drops_what_it_queued(need_offline_tools):
    """A session ending while its queueing runs: close waits for it (it would otherwise
    start a new pool of ptxas after the session), then drops the parts it queued; a
    queueing that was never let go does nothing."""
    need_offline_tools("sm_80")
    import threading
    import time
    ps = _probes("sm_80", ["add.u32", "fma.rn.f32"])
    b = build.Builds()
    started, done = threading.Event(), []

    def queue():
        started.set()
        time.sleep(0.3)
        b.offline_groups([build.Group("batch", "sm_80", ps)], wait=False)
        done.append(True)
    b.later(queue)
    b.later(lambda: done.append("never"))
    b.go()
    started.wait(10)
    b.close()
    assert done == [True] and b._pool is None and b._queue_pool is None
    idle = build.Builds()
    idle.later(lambda: done.append("never let go"))
    idle.close()
    assert done == [True] and idle.assembled == 0
