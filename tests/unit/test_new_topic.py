"""docs/new-topic.md followed for a toy topic kept outside the suite: a package of its own
(rows, kernels, run, groups), registered from a conftest.py, and a test module with a static
and a hardware test. The suite collects it, assembles and verifies its SASS offline, records
and then compares its snapshot; without a GPU the hardware test is skipped with the reason."""
from __future__ import annotations

import json
import textwrap

import pytest


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


FILES = {
    "conftest.py": _src(r'''
        from pytest_gpuchar.core.topic import TopicInfo, register

        register(TopicInfo("toy", "a toy topic: add.u32 latency", own_files=False,
                           package="toy_topic"))
        '''),
    "toy_topic/__init__.py": _src(r'''
        """A toy topic: the latency of add.u32 (a dependent chain)."""
        from __future__ import annotations


        def groups(arch: str) -> list:
            """The modules the topic compiles for `arch` (core.topic.Topic)."""
            from . import run
            return run.groups(arch)
        '''),
    "toy_topic/rows.py": _src(r'''
        """The topic's rows: data only."""
        from __future__ import annotations

        from dataclasses import dataclass

        from pytest_gpuchar.core.ptx import Operand, Template

        LENGTHS = (16, 32, 64)         # chain lengths: the slope over them is the latency


        @dataclass(frozen=True)
        class AddRow:
            name: str
            template: Template          # the PTX of one op, {d} <- {a} op {b}
            unit: tuple[str, ...]       # the SASS one op must become (opcode patterns)


        U32 = Operand(32, "int")
        ADD = Template("add.u32 {d}, {a}, {b};", {"d": U32, "a": U32, "b": U32})
        ROWS = [AddRow("add.u32", ADD, ("IADD3|IMAD.IADD|VIADD|IADD",))]
        '''),
    "toy_topic/kernels.py": _src(r'''
        """The topic's probes: PTX on the shared operand frame (core.ptx)."""
        from __future__ import annotations

        from pytest_gpuchar.core import ptx
        from pytest_gpuchar.core.probe import Probe

        from .rows import LENGTHS, AddRow


        def latency_probe(row: AddRow, arch: str) -> Probe:
            """A dependent chain of the row's op at each length: op k+1 reads op k's result."""
            kernels, entries, inputs, slots = [], {}, {}, {}
            for n in LENGTHS:
                regs = ptx.Registers()
                body = ptx.dependent_chain(row.template, n, regs, "fib")   # two chain registers
                entry = f"toy_add_u32_n{n}"
                kernels.append(ptx.operand_kernel(entry, regs, body.lines, body.results))
                entries[n], inputs[n] = entry, regs.inputs
                slots[n] = ptx.out_bytes(len(body.results), len(regs.inputs)) // ptx.SLOT_BYTES
            return Probe(f"toy/latency/{row.name}", arch, "\n" + "\n".join(kernels), entries,
                         {n: n for n in LENGTHS}, unit=row.unit, chained=True, inputs=inputs,
                         out_slots=slots)
        '''),
    "toy_topic/run.py": _src(r'''
        """The topic's runs: a row measured through a Context (core.topic)."""
        from __future__ import annotations

        from pytest_gpuchar.core import topic
        from pytest_gpuchar.core.build import Group
        from pytest_gpuchar.core.fit import fit
        from pytest_gpuchar.core.runner import frame_plan, thread0_cycles
        from pytest_gpuchar.core.topic import Context
        from pytest_gpuchar.results.judge import Measured, Measurement

        from . import kernels
        from .rows import ROWS, AddRow

        METHOD = ("slope of the cycles of a dependent chain over its lengths {lengths}; median of "
                  "{reps} launches after a warm-up; driver-JIT SASS verified")


        def groups(arch: str) -> list[Group]:
            return [Group("toy", arch, [kernels.latency_probe(r, arch) for r in ROWS])]


        def latency(ctx: Context, row: AddRow, arch: str) -> Measured:
            """Cycles per op of the chain on the GPU."""
            probe = kernels.latency_probe(row, arch)
            built, verdict = topic.built(ctx, probe, groups)
            records = ctx.runner.measure(frame_plan(probe, built.compiled, ctx.repeats))
            f = fit(thread0_cycles(records), probe.ops)
            m = Measurement.of_fit(f"toy.latency.{row.name}", f,
                                   method=METHOD.format(lengths=list(probe.ops), reps=ctx.repeats),
                                   data={"sass_unit": dict(verdict.unit)})
            return Measured(m, sass=probe.snapshot_text(built.functions))
        '''),
    "tests/test_toy.py": _src(r'''
        """The toy topic's tests: its SASS offline on any machine, its latency on a GPU."""
        from __future__ import annotations

        import pytest

        from toy_topic import kernels, rows, run

        pytestmark = pytest.mark.topic("toy")
        ROWS = [pytest.param(r, id=r.name) for r in rows.ROWS]


        @pytest.mark.static
        @pytest.mark.parametrize("row", ROWS)
        def test_toy_mapping(arch, row, static_check):
            """The chain assembles for `arch`, one op per link, and matches its SASS snapshot."""
            static_check(kernels.latency_probe(row, arch), key=f"sass.toy.{row.name}")


        @pytest.mark.hardware
        @pytest.mark.parametrize("row", ROWS)
        def test_toy_latency(arch, row, gpu, gpuchar, hardware_row):
            hardware_row(run.latency(gpuchar, row, arch))
        '''),
}


@pytest.fixture
def toy(pytester, monkeypatch, need_offline_tools):
    need_offline_tools("sm_90")
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    for path, text in FILES.items():
        (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / path).write_text(text)
    return pytester


def _run(pytester, *args):
    return pytester.runpytest_subprocess("tests", "--gpu-arch=sm_90", "-p", "no:cacheprovider",
                                         "-rs", *args)


def test_a_toy_topic_added_by_the_doc_runs_offline(toy):
    first = _run(toy, "--snapshot-update")
    assert first.ret == 0, first.stdout.str()[-3000:]
    snaps = list(toy.path.glob("tests/__sass__/ptxas-*/sm_90/test_toy/*.sass"))
    assert len(snaps) == 1 and "IADD" in snaps[0].read_text()
    out = toy.path / "report"
    again = _run(toy, "--gpuchar-report", str(out))
    assert again.ret == 0, again.stdout.str()[-3000:]
    again.assert_outcomes(passed=1, skipped=1)
    again.stdout.fnmatch_lines(["*hardware: GPUCHAR_NO_GPU is set*", "*by topic: toy*"])
    doc = json.loads((out / "gpuchar-results.json").read_text())
    assert doc["meta"]["topics"] == {"tests/test_toy.py": "toy"}
    assert doc["meta"]["topic_docs"] == {"toy": "a toy topic: add.u32 latency"}


def test_a_topic_name_is_taken_once():
    from pytest_gpuchar.core.topic import TOPICS, TopicInfo, TopicTaken, register
    with pytest.raises(TopicTaken, match="'dpx' is already registered"):
        register(TopicInfo("dpx", "another", own_files=False, package="elsewhere"))
    with pytest.raises(ValueError, match="own_files=False"):
        register(TopicInfo("toy2", "toy", package="toy2"))
    assert register(TOPICS["dpx"]) is TOPICS["dpx"]
