"""core.smclock: the SM-clock kernel is a probe verified like any other. Its SASS (ptxas +
nvdisasm, offline) verifies for every arch family the static suite covers; kernels that break
it (unrolled, the loop gone, the loop outside the clock reads, a %globaltimer read inside
them) are refused; the figure is read only from a launch whose LCG value proves the loop ran;
Gpu.sm_clock_mhz verifies the driver's SASS before it launches anything."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import gpu as g
from pytest_gpuchar.core import smclock
from pytest_gpuchar.core.build import Builds, functions_of
from pytest_gpuchar.core.jit import Compiled, JitCache
from pytest_gpuchar.core import toolchain
from pytest_gpuchar.core.loop import verify_loop
from pytest_gpuchar.core.verify import ProbeInvalid

ARCHS = ["sm_50", "sm_61", "sm_70", "sm_80", "sm_90", "sm_100", "sm_120"]

PRAGMA = '.pragma "nounroll";\n'
C0 = "mov.u64 %c0, %clock64;\n"
T0 = "mov.u64 %t0, %globaltimer;\n"
BRANCH = "@%p bra LOOP;\n"
# kernels that break the probe, each made from the real one by one edit
BROKEN = {
    "unrolled": lambda k: k.replace(PRAGMA, ""),                  # ptxas unrolls it fourfold
    "no_loop": lambda k: k.replace(BRANCH, ""),                   # one LCG step, no loop
    "loop_before_clock": lambda k: k.replace(C0, "").replace(BRANCH, BRANCH + C0),
    "timer_inside": lambda k: k.replace(T0, "").replace(C0, C0 + T0),
}


def variant(kernel: str, name: str) -> str:
    text = BROKEN[name](kernel)
    assert text != kernel
    return text.replace(f".entry {smclock.ENTRY}(", f".entry {smclock.ENTRY}_{name}(")


def functions(builds: Builds, arch: str) -> dict:
    """The SASS of the probe's kernel and of every broken variant, one module for `arch`."""
    p = smclock.probe(arch)
    text = p.ptx + "".join("\n" + variant(p.kernels, name) for name in BROKEN)
    return builds.offline_module(arch, text, "sm_clock_variants")[1]


@pytest.mark.parametrize("arch", ARCHS)
def test_the_clock_probe_verifies_offline(arch, need_offline_tools, offline_builds):
    need_offline_tools(arch)
    p = smclock.probe(arch)
    v = p.check(functions(offline_builds, arch))
    # one LCG step per iteration: one IMAD (three XMAD before Volta), plus the counter's add,
    # the compare and the branch
    assert v.ok and v.unit == {op: 1.0 for op in smclock.unit(arch)}
    kinds = sorted(op.split(".")[0].lstrip("U") for op in v.loop_control)
    assert kinds in (["BRA", "IADD3", "ISETP"], ["BRA", "IADD32I", "ISETP"])
    assert sum(v.loop_control.values()) == 3
    # the body: the step, the control, and at most one never-executed filler (sm_70's SHFL)
    assert v.body_instructions - len(p.unit) - 3 in (0, 1)


@pytest.mark.parametrize("arch", ["sm_61", "sm_80", "sm_90", "sm_120"])
@pytest.mark.parametrize("name, why", [
    ("unrolled", "loop body holds .* intended instructions"),
    ("no_loop", "0 backward branch|expected exactly one loop"),
    ("loop_before_clock", "expected exactly one loop|found 0"),
    # (sm_61's 64-bit %globaltimer read is a retry loop: a second loop in the region; sm_120
    # reads it to a uniform register, no setup instruction)
    ("timer_inside", "globaltimer reads do not enclose the clock reads|found 2|"
                     "unexpected instructions around the loop: .*'CS2UR'"),
])
def test_a_broken_clock_kernel_is_refused(arch, name, why, need_offline_tools,
                                          offline_builds):
    need_offline_tools(arch)
    funcs = functions(offline_builds, arch)
    p = smclock.probe(arch)
    broken = smclock.probe(arch)
    broken.entries = {1: f"{smclock.ENTRY}_{name}"}
    assert p.check(funcs).ok
    with pytest.raises(ProbeInvalid, match=why):
        broken.check(funcs)


def test_the_lcg_model_is_the_kernels_loop():
    x = 1000
    for n in range(1, 40):
        x = (x * smclock.LCG_A + smclock.LCG_C) % 2 ** 32
        assert smclock.lcg(1000, n) == x
    assert smclock.lcg(7, 0) == smclock.lcg(7, 1)          # do-while: one step at least
    big = 2_000_000
    assert smclock.lcg(big, big) == smclock.lcg(smclock.lcg(big, big - 5), 5)


def test_a_figure_is_read_only_from_a_launch_that_ran_the_loop():
    n = 2_000_000
    assert smclock.mhz(19_800_000, 10_000_000, smclock.lcg(n, n), n) == pytest.approx(1980.0)
    with pytest.raises(ProbeInvalid, match="did not run as compiled"):
        smclock.mhz(19_800_000, 10_000_000, smclock.lcg(n, n // 4), n)
    with pytest.raises(ProbeInvalid, match="0 ns"):
        smclock.mhz(19_800_000, 0, smclock.lcg(n, n), n)


class OfflineJit(JitCache):
    """The driver's JIT replaced by the offline ptxas (a real cubin, real SASS) and a launch
    that runs the kernel's loop in Python: `compiler` edits the PTX first, as a JIT that
    compiled it differently would."""

    def __init__(self, arch: str, compiler=lambda text: text, steps=lambda n: n):
        super().__init__()
        self.arch, self.compiler, self.steps, self.launched = arch, compiler, steps, []

    def compile(self, ptx, driver, name="probe.ptx"):
        cubin = toolchain.assemble(self.compiler(ptx), self.arch, name=name)
        jit = self

        class Module:
            def get_function(self, entry):
                def run(grid, block, args, shared_mem=0):
                    out, n = args
                    jit.launched.append(int(n))
                    out[:] = [int(n) * 4, int(n) * 2, smclock.lcg(int(n), jit.steps(int(n)))]
                return run
        return Compiled(cubin, "", Module(), driver)


class Dev:
    arch, driver = "sm_90", "580.0"


def test_sm_clock_mhz_verifies_the_sass_before_launching(fake_cupy, need_offline_tools):
    need_offline_tools("sm_90")
    jit = OfflineJit("sm_90")
    asked = []

    def door(probe, funcs):
        asked.append(probe.name)
        return probe.check(funcs)
    assert g.Gpu(Dev(), jit).sm_clock_mhz(1000, verify=door) == pytest.approx(2000.0)
    assert asked == [smclock.NAME] and jit.launched == [100, 1000]
    # a JIT that unrolls the loop: invalid, and nothing is launched
    unrolling = OfflineJit("sm_90", compiler=lambda text: text.replace(PRAGMA, ""))
    with pytest.raises(ProbeInvalid, match="probe invalid: clock/sm_clock"):
        g.Gpu(Dev(), unrolling).sm_clock_mhz(1000)
    assert unrolling.launched == []
    # a launch whose loop stopped early: no number
    short = OfflineJit("sm_90", steps=lambda n: n - 1)
    with pytest.raises(ProbeInvalid, match="did not run as compiled"):
        g.Gpu(Dev(), short).sm_clock_mhz(1000)
    assert short.launched == [100, 1000]


def test_sm_clock_mhz_takes_the_module_a_session_linked(fake_cupy, need_offline_tools):
    """With `module` (a session's driver links, made ahead), the probe's module and SASS
    come from it, and the SASS is still verified before anything is launched."""
    need_offline_tools("sm_90")
    asked = []

    def module_of(jit):
        def module(text, name):
            asked.append((text, name))
            compiled = jit.compile(text, "580.0", name)
            return compiled, functions_of(compiled.cubin, "sm_90")
        return module
    jit = OfflineJit("sm_90")
    assert g.Gpu(Dev(), JitCache()).sm_clock_mhz(1000, module=module_of(jit)) == \
        pytest.approx(2000.0)
    # the module a session links ahead (schedule.start: smclock.module), text and name
    assert asked == [smclock.module("sm_90")] and jit.launched == [100, 1000]
    unrolling = OfflineJit("sm_90", compiler=lambda text: text.replace(PRAGMA, ""))
    with pytest.raises(ProbeInvalid, match="probe invalid: clock/sm_clock"):
        g.Gpu(Dev(), JitCache()).sm_clock_mhz(1000, module=module_of(unrolling))
    assert unrolling.launched == []


def test_the_timer_bracket_is_checked_where_the_loop_is_intact(need_offline_tools,
                                                               offline_builds):
    """On sm_90 a %globaltimer read moved between the first clock read and the loop leaves
    the loop check nothing to object to (a CS2R is setup): the bracket check refuses it."""
    need_offline_tools("sm_90")
    funcs = functions(offline_builds, "sm_90")
    broken = smclock.probe("sm_90")
    broken.entries = {1: f"{smclock.ENTRY}_timer_inside"}
    func = broken.sass_of(funcs)
    assert verify_loop(broken.name, "sm_90", broken.unit, (1,), func, ops=1).ok
    with pytest.raises(ProbeInvalid, match="do not enclose the clock reads"):
        broken.check_bracket(func)
