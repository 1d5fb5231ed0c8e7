"""The fixtures test modules use, and the two steps a characterisation test calls:
``static_check`` (offline: compile, verify, snapshot) and ``hardware_row`` (judge measured
figures against the expectations, record them for the reports, compare the driver's SASS with
its snapshot, turn the verdict into the test's outcome)."""
from __future__ import annotations

import errno
import shlex
from pathlib import Path
from typing import Callable, Iterable

import pytest

from .core import sass, toolchain
from .core.build import Built
from .core.probe import Probe
from .core.topic import Checked
from .core.verify import ProbeInvalid
from .results.judge import Measured, Measurement, Result, Status, judge
from .session import GpuCharSession

STATE = pytest.StashKey[GpuCharSession]()


def state(config: pytest.Config) -> GpuCharSession:
    return config.stash[STATE]


@pytest.fixture(scope="session")
def gpuchar(request) -> GpuCharSession:
    return state(request.config)


@pytest.fixture
def gpu(gpuchar: GpuCharSession, arch: str):
    """The GPU under test (of `arch`), or the test is skipped with the reason."""
    return gpuchar.require_gpu(arch)


@pytest.fixture
def offline_tools(arch: str):
    """ptxas and nvdisasm for `arch`, or the test is skipped with the install command."""
    try:
        return toolchain.find("ptxas", arch), toolchain.find("nvdisasm", arch)
    except toolchain.ToolMissing as e:
        pytest.skip(f"static: {e}")


@pytest.fixture
def expected(gpuchar: GpuCharSession, arch: str):
    """The arch's expectation file (validated), or None if there is none."""
    return gpuchar.expectations.load(arch)


@pytest.fixture
def sass_snapshot(snapshot, request):
    """sass_snapshot(tag) -> a syrupy assertion for SASS made by compiler `tag` (kept in the
    directory of that compiler and of the test's arch). An offline compiler and arch with no
    record at all (a new target, a new ptxas) is a skip saying how to record one, not a
    failure of every test."""
    from .core.locations import sass_dir
    from .results.snapshot import SASSSnapshotExtension, use_compiler

    def _for(tag: str):
        arch = request.getfixturevalue("arch") if "arch" in request.fixturenames else "any"
        record = sass_dir(request.node.path, f"{tag}/{arch}")
        if tag.startswith("ptxas-") and not record.is_dir() and \
                not request.config.option.update_snapshots:
            pytest.skip(f"static: no SASS snapshots recorded for {tag}/{arch}: review the "
                        f"SASS and record them with pytest --snapshot-update --gpu-arch={arch}")
        use_compiler(request.node, f"{tag}/{arch}")
        return snapshot.use_extension(SASSSnapshotExtension)
    return _for


class Record:
    """record(measurement, arch) -> Result: judged against the expectation file (this
    device's override first) and kept for the reports; record.note(result) keeps a result
    made elsewhere (an invalid probe, a mapping note)."""

    def __init__(self, node: pytest.Item, session: GpuCharSession) -> None:
        self.node = node
        self.session = session

    def __call__(self, m: Measurement, arch: str) -> Result:
        r = judge(m, arch, self.session.expected(arch, m.key), test=test_id(self.node),
                  provenance=self.session.provenance())
        return self.note(r)

    def note(self, r: Result) -> Result:
        # a result made elsewhere names its test, and a hardware one the GPU it ran on (a
        # fleet report tells the boards' notes apart)
        r.test = r.test or test_id(self.node)
        if not r.provenance and self.node.get_closest_marker("hardware") is not None:
            r.provenance = self.session.provenance()
        self.node.user_properties.append(("gpuchar_result", r.as_dict()))
        return self.session.recorder.add(r)


@pytest.fixture
def record(request, gpuchar: GpuCharSession) -> Record:
    return Record(request.node, gpuchar)


@pytest.fixture
def gpuchar_artifact(request, gpuchar: GpuCharSession):
    """gpuchar_artifact(name, caption) -> Path to write a plot/curve into the run's report
    (<report>/artifacts/<name>, listed in gpuchar-summary.md), or None without
    --gpuchar-report."""
    def _artifact(name: str, caption: str) -> Path | None:
        path = gpuchar.artifact(name, caption, test_id(request.node))
        if path is not None:
            request.node.user_properties.append(
                ("gpuchar_artifact", {"name": name, "caption": caption,
                                      "test": test_id(request.node)}))
        return path
    return _artifact


def assert_results(results: Iterable[Result], checks: Iterable[str] = ()) -> None:
    """Turn judged results (and a topic's failed invariants) into the test's outcome: any
    failure fails the test with every message; otherwise an unstable figure is an xfail."""
    results = list(results)
    bad = [r.failure() for r in results if r.status == Status.FAIL] + list(checks)
    if bad:
        raise AssertionError("\n".join(bad))
    for r in results:
        if r.status == Status.UNSTABLE:
            pytest.xfail(f"unstable: {r.key} = {r.value:.2f} {r.unit}: {r.detail}")


# --- the snapshot assertion ---------------------------------------------------------------------

def match_snapshot(received: str, assertion, node: pytest.Item) -> None:
    """received == its SASS snapshot (syrupy's diff when it differs), or the test fails with
    what to do: a snapshot never recorded names the command that records it; a snapshot that
    --snapshot-update could not write names the file and the OS error (the write is atomic:
    the file on disk is as it was)."""
    try:
        assert received == assertion
        return
    except AssertionError:
        last = assertion.executions.get(assertion.num_executions - 1)
        why = _snapshot_trouble(last, node, received) if last is not None else ""
        if not why:
            raise
    pytest.fail(why, pytrace=False)     # (outside the except: syrupy's diff is not repeated)


def _snapshot_trouble(result, node: pytest.Item, received: str) -> str:
    root = node.config.rootpath
    loc = Path(result.snapshot_location)
    where = loc.parent.relative_to(root) if loc.is_relative_to(root) else loc.parent
    if isinstance(result.exception, OSError):
        e = result.exception
        code = errno.errorcode.get(e.errno, "") if e.errno else ""
        return (f"cannot write the SASS snapshot {where / loc.name}: {e.strerror or e}"
                f"{f' ({code})' if code else ''}; the file is as it was (nothing was half-"
                f"written): make {where} writable and run --snapshot-update again")
    if result.recalled_data is None and not node.config.option.update_snapshots:
        return (f"no SASS snapshot recorded for {node.name}: the snapshot {loc.name} does not "
                f"exist in {where}; review the SASS below and record it with\n"
                f"    {record_command(node)}\n\n{received}")
    return ""


def test_id(node: pytest.Item) -> str:
    """The test's node id as a user types it: without the @group suffix pytest-xdist's
    loadgroup distribution gives it on a worker (the id results and artifacts are recorded
    under, the same in a serial and a split run)."""
    nodeid = node.nodeid
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in node.iter_markers("xdist_group")})
    return nodeid.removesuffix(f"@{'_'.join(names)}") if names else nodeid


def record_command(node: pytest.Item) -> str:
    """The command that records this test's snapshot: its node id (test_id) and its arch."""
    nodeid = test_id(node)
    spec = getattr(node, "callspec", None)
    arch = spec.params.get("arch") if spec else None
    return (f"pytest {shlex.quote(nodeid)}" + (f" --gpu-arch={arch}" if arch else "")
            + " --snapshot-update")


# --- the two steps ------------------------------------------------------------------------------

def default_snapshot(checked: Checked) -> str:
    tool = checked.tool
    return "".join(f"// {b.probe.name} ({b.probe.arch}, {tool.name} {tool.version}), chain "
                   f"length {b.probe.snapshot_length()}\n{b.probe.snapshot_text(b.functions)}\n"
                   for b, _ in checked)


@pytest.fixture
def static_check(request, gpuchar: GpuCharSession, sass_snapshot, record: Record):
    """static_check(probes, *, snapshot=default_snapshot, invalid="fail") -> Checked.

    Each probe assembled offline for its arch (from its topic's batch), its timed regions
    verified and, together, its SASS compared with this compiler's snapshot. Tools missing:
    skip with the install command. A probe whose SASS is not what it intends is recorded as
    "invalid" (no number) and fails the test, or with invalid="xfail" is an expected failure
    (rows whose compiler transformation is a known, reported fact)."""
    def _check(probes: Probe | list[Probe], *, snapshot: Callable[[Checked], str] | None =
               default_snapshot, invalid: str = "fail", key: str | None = None) -> Checked:
        probes = [probes] if isinstance(probes, Probe) else list(probes)
        checked = Checked()
        for p in probes:
            try:
                built = gpuchar.builds.offline(p)
            except toolchain.ToolMissing as e:
                pytest.skip(f"static: {e}")
            except toolchain.AssemblyError as e:
                pytest.fail(str(e), pytrace=False)
            try:
                checked.append((built, gpuchar.verify(p, built.functions,
                                                      toolchain.compiler_tag(built.tool))))
            except (ProbeInvalid, sass.RegionError) as e:
                first = str(e).splitlines()[0]
                record.note(Result(key or f"sass.{p.name}", p.arch, Status.INVALID,
                                   test=test_id(request.node), detail=first))
                if invalid == "xfail":
                    pytest.xfail(first)
                pytest.fail(str(e), pytrace=False)
        if snapshot is not None and checked:
            match_snapshot(snapshot(checked), sass_snapshot(toolchain.compiler_tag(checked.tool)),
                           record.node)
        return checked
    return _check


@pytest.fixture
def hardware_row(gpuchar: GpuCharSession, arch: str, record: Record, sass_snapshot):
    """hardware_row(measured) -> [Result]: every figure judged and recorded (its notes recorded
    as they are), the driver-JIT SASS compared with its snapshot, then the outcome (fail /
    unstable -> xfail / pass)."""
    def _row(measured: Measured | Measurement) -> list[Result]:
        if isinstance(measured, Measurement):
            measured = Measured(measured)
        results = [record(m, arch) for m in measured.figures]
        for note in measured.notes:
            record.note(note)
        if measured.sass is not None:
            match_snapshot(measured.sass, sass_snapshot(f"jit-driver-{gpuchar.device.driver}"),
                           record.node)
        checks = measured.checks + [c for m in measured.figures for c in m.checks]
        if not checks:
            # a failure from here on is only a figure out of tolerance: --snapshot-update
            # may accept this test's figures (results/accept.py)
            record.node.user_properties.append(("gpuchar_tolerance_only", True))
        assert_results(results, checks)
        return results
    return _row


__all__ = ["Built", "Checked", "Measured", "Record", "assert_results", "default_snapshot",
           "gpuchar", "gpu", "offline_tools", "expected", "sass_snapshot", "record",
           "gpuchar_artifact", "static_check", "hardware_row", "state"]
