"""The plugin as users meet it, through pytester: options, markers, header, skips, reports."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from pytest_gpuchar.core import archs

HW_TEST = """
import pytest

@pytest.mark.hardware
def test_needs_gpu(gpu):
    pass
"""


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")


def test_plugin_is_registered_by_entry_point(pytester):
    result = pytester.runpytest("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*--gpu-arch=sm_XX*", "*--gpuchar-report=DIR*"])


def test_markers_are_documented(pytester):
    result = pytester.runpytest("--markers")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["@pytest.mark.hardware: *GPU*",
                                 "@pytest.mark.static: *ptxas*"])
    out = result.stdout.str()
    assert "@pytest.mark.nightly:" in out and "@pytest.mark.slow:" in out


def test_unknown_gpu_arch_is_a_usage_error(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--gpu-arch=sm_99x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR == 4
    err = result.stderr.str()
    assert "sm_99x" in err
    assert "valid values" in err
    for a in archs.KNOWN_ARCHS:
        assert a in err
    assert "Traceback" not in err


def test_gpu_arch_is_canonicalised(pytester, no_gpu):
    pytester.makepyfile("def test_arch(arch): assert arch == 'sm_80'")
    result = pytester.runpytest("--gpu-arch=80", "-v")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*test_arch?sm_80? PASSED*"])


def test_disabled_with_no_gpuchar(pytester):
    pytester.makepyfile("def test_x(): pass")
    assert pytester.runpytest("-p", "no:gpuchar").ret == 0
    result = pytester.runpytest("-p", "no:gpuchar", "--gpu-arch=sm_80")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unrecognized arguments: --gpu-arch" in result.stderr.str()
    result = pytester.runpytest("-p", "no:gpuchar", "--markers")
    assert "@pytest.mark.hardware" not in result.stdout.str()


def test_no_gpu_skips_hardware_tests_with_reason(pytester, no_gpu):
    pytester.makepyfile(HW_TEST)
    result = pytester.runpytest("--gpu-arch=sm_80", "-rs")
    assert result.ret == 0
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] >= 1 and "passed" not in outcomes and "failed" not in outcomes
    out = result.stdout.str()
    assert "deselected" not in out
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *GPUCHAR_NO_GPU*"])
    # the terminal summary groups the skip reasons
    result.stdout.fnmatch_lines(["*skipped 1: hardware: GPUCHAR_NO_GPU is set*"])


def test_report_header(pytester, no_gpu):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--gpu-arch=sm_80")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gpuchar: archs sm_80 (requested)",
                                 "gpuchar: GPUCHAR_NO_GPU is set; hardware tests will be skipped",
                                 "gpuchar: ptxas*"])


def test_default_archs_without_gpu_are_the_expectation_files(pytester, no_gpu):
    from pytest_gpuchar.results import expectations
    pytester.makepyfile("def test_arch(arch): pass")
    result = pytester.runpytest("-v")
    assert result.ret == 0
    have = set(expectations.available(expectations.default_root()))
    want = [a for a in archs.STATIC_ARCHS if a in have]
    assert want
    result.assert_outcomes(passed=len(want))
    for a in want:
        assert f"test_arch[{a}] PASSED" in result.stdout.str()


def test_gpuchar_report_is_written(pytester, no_gpu):
    pytester.makepyfile(textwrap.dedent("""
        import pytest
        from pytest_gpuchar.results.judge import Measurement

        def test_rec(record, arch):
            r = record(Measurement("unit.test.value", 3.5, "cycles"), arch)
            assert r.status == "measured"

        @pytest.mark.hardware
        def test_hw(gpu):
            pass

        def test_saw(arch):
            pytest.skip("hardware: load steps see one latency level from every SM")
    """))
    out_dir = pytester.path / "out"
    result = pytester.runpytest("--gpu-arch=sm_80", f"--gpuchar-report={out_dir}",
                                           "-k", "sm_80")
    assert result.ret == 0
    result.assert_outcomes(passed=1, skipped=2)
    data = json.loads((out_dir / "gpuchar-results.json").read_text())
    assert data["meta"]["archs"] == ["sm_80"]
    assert data["meta"]["skipped"] == {
        "hardware: GPUCHAR_NO_GPU is set": 1,
        "hardware: load steps see one latency level from every SM": 1}
    # a skip for what a measurement saw is kept by test (the next night's comparison reads
    # it); a skip for the machine is not
    assert data["meta"]["measured_skips"] == {
        "test_gpuchar_report_is_written.py::test_saw[sm_80]":
            "hardware: load steps see one latency level from every SM"}
    [r] = data["results"]
    assert (r["key"], r["arch"], r["value"], r["status"]) == ("unit.test.value", "sm_80", 3.5,
                                                              "measured")
    assert (out_dir / "gpuchar-summary.md").read_text().startswith("# pytest-gpuchar run")
    page = (out_dir / "index.html").read_text(encoding="utf-8")
    assert 'data-key="unit.test.value"' in page and 'data-status="measured"' in page
    result.stdout.fnmatch_lines([f"reports in {out_dir}: gpuchar-results.json, "
                                 f"gpuchar-summary.md, index.html"])


def test_record_compares_with_the_expectation_file(pytester, no_gpu):
    from pytest_gpuchar.results import expectations
    e = expectations.load("sm_80", expectations.default_root())
    key, exp = next((k, x) for k, x in e.characteristics.items() if x.value is not None)
    pytester.makepyfile(textwrap.dedent(f"""
        from pytest_gpuchar.results.judge import Measurement

        def test_ok(arch, hardware_row):
            [r] = hardware_row(Measurement({key!r}, {exp.value!r}, {exp.unit!r}))
            assert r.status == "pass"

        def test_bad(arch, hardware_row):
            hardware_row(Measurement({key!r}, {exp.value!r} + 1e6, {exp.unit!r}))
    """))
    result = pytester.runpytest("--gpu-arch=sm_80", "-k", "sm_80")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*{key} on sm_80: measured*expected*"])


def test_unstable_result_is_xfail(pytester):
    pytester.makepyfile(textwrap.dedent("""
        from pytest_gpuchar.fixtures import assert_results
        from pytest_gpuchar.results.judge import Result

        def test_unstable():
            assert_results([Result("latency.x", "sm_80", "unstable", 4.0, "cycles/op",
                                   detail="spread too wide")])
    """))
    result = pytester.runpytest("-rx")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*unstable: latency.x = 4.00 cycles/op: spread too wide*"])


def test_importing_the_plugin_does_not_import_cupy(tmp_path):
    # a cupy that fails loudly if anything imports it
    fake = tmp_path / "cupy"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('cupy imported at plugin import')\n")
    code = ("import sys; sys.path.insert(0, %r); import pytest_gpuchar.plugin; "
            "assert 'cupy' not in sys.modules, 'cupy imported'; print('ok')" % str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


ARTIFACT_TEST = """
from pytest_gpuchar.results import plots

def test_plot(gpuchar_artifact):
    path = gpuchar_artifact("curve.png", "latency against footprint")
    if path is None:
        return
    plt = plots.pyplot()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [33, 33, 260])
    plots.save(fig, path)

def test_data(gpuchar_artifact):
    path = gpuchar_artifact("curve.csv", "the curve's points")
    if path is not None:
        path.write_text("kb,cycles\\n1,33\\n")
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_artifacts_are_written_and_listed_in_the_report(pytester, no_gpu, workers):
    if workers:
        pytest.importorskip("xdist")
    pytester.makepyfile(ARTIFACT_TEST)
    out = pytester.path / "out"
    args = ["--gpuchar-report", str(out)] + (["-n", str(workers)] if workers else [])
    result = pytester.runpytest(*args)
    assert result.ret == 0
    png = out / "artifacts" / "curve.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "gpuchar-summary.md").read_text()
    assert "![latency against footprint](artifacts/curve.png)" in md
    assert "[curve.csv](artifacts/curve.csv)" in md
    data = json.loads((out / "gpuchar-results.json").read_text())
    assert sorted(a["name"] for a in data["artifacts"]) == ["curve.csv", "curve.png"]


def test_artifacts_without_a_report_directory(pytester, no_gpu):
    pytester.makepyfile(ARTIFACT_TEST)
    result = pytester.runpytest()
    assert result.ret == 0
    assert not list(pytester.path.rglob("*.png"))


def test_benchmark_history_is_stored_per_arch_with_gpu_machine_info(pytester, no_gpu,
                                                                    monkeypatch):
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)   # this suite itself may run under xdist
    pytester.makepyfile("def test_b(benchmark):\n    benchmark(lambda: 1)\n")
    # (where the history goes, not how precise: pytest-benchmark's default spends a second of
    # CPU timing the lambda)
    result = pytester.runpytest("--gpu-arch=sm_80", "--benchmark-autosave",
                                "--benchmark-max-time=0.01", "-p", "no:cacheprovider")
    assert result.ret == 0
    saved = list((pytester.path / ".benchmarks" / "sm_80").rglob("*.json"))
    assert len(saved) == 1, list(pytester.path.rglob("*.json"))
    info = json.loads(saved[0].read_text())["machine_info"]
    assert info["gpu"] is None and "GPUCHAR_NO_GPU" in info["gpu_reason"]


def test_benchmarks_are_disabled_under_xdist(pytester, no_gpu):
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    pytester.makepyfile("def test_b(benchmark):\n    benchmark(lambda: 1)\n")
    result = pytester.runpytest("-n", "1", "--gpu-arch=sm_80", "-p", "no:cacheprovider")
    assert result.ret == 0
    assert "PytestBenchmarkWarning" not in result.stdout.str()


def test_terminal_summary_shows_moved_results(pytester, no_gpu):
    pytester.makepyfile(textwrap.dedent("""
        from pytest_gpuchar.results.expectations import Expected
        from pytest_gpuchar.results.judge import Measurement, judge

        def test_x(gpuchar):
            exp = Expected("latency.k", "cycles", value=10.0, abs_tol=2.0, source="paper")
            for v in [10.0] * 45 + [11.8]:
                m = Measurement("latency.k", v, "cycles", 0.0)
                gpuchar.recorder.add(judge(m, "sm_80", exp))
    """))
    result = pytester.runpytest("--gpu-arch=sm_80", "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*failed, unstable or moved*0 + 1 of 46 measured*",
                                 "*latency.k*11.80*+1.80*pass (moved)*"])


def test_jit_prefetch_links_in_the_background_and_relinks_failures(monkeypatch):
    """JitCache.prefetch links modules in worker threads; compile takes the cubin from there
    (one link per module), and a background failure is linked again in the caller's thread,
    which then raises its own error."""
    import sys
    import threading
    import types
    from pytest_gpuchar.core import jit
    fake = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    runtime = types.SimpleNamespace(setDevice=lambda i: None)

    class Module:
        def load(self, cubin):
            self.cubin = cubin
    cuda.runtime = runtime
    cuda.function = types.SimpleNamespace(Module=Module)
    fake.cuda = cuda
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    calls = []

    def link(ptx, name="probe.ptx"):
        calls.append((ptx, threading.current_thread().name))
        if "bad" in ptx:
            raise jit.JITError(f"cuLinkComplete({name}) failed")
        return ptx.encode(), "info"
    monkeypatch.setattr(jit, "link", link)
    cache = jit.JitCache(0)
    cache.prefetch([("good", "a.ptx"), ("bad", "b.ptx")], "580")
    c = cache.compile("good", "580", "a.ptx")
    assert c.cubin == b"good" and c.module.cubin == b"good"
    assert [t for p, t in calls if p == "good"] and all(
        t.startswith("gpuchar-jit") for p, t in calls if p == "good")
    assert cache.compile("good", "580") is c and len([p for p, _ in calls if p == "good"]) == 1
    with pytest.raises(jit.JITError, match=r"b\.ptx"):
        cache.compile("bad", "580", "b.ptx")
    assert [t for p, t in calls if p == "bad"][-1] == threading.current_thread().name
    assert jit.JitCache(0).compile_all([], "580") == []     # caches are per session


def test_n_auto_is_one_worker_per_core_without_a_gpu(pytester, monkeypatch):
    """`-n auto` (the README's test command): pytest-xdist's one worker per core where no GPU
    is shown (CuPy absent, or GPUCHAR_NO_GPU set)."""
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    from xdist.plugin import pytest_xdist_auto_num_workers as xdist_default
    from pytest_gpuchar import plugin
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    assert plugin.pytest_xdist_auto_num_workers(pytester.parseconfig()) is None
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("-n", "auto")
    assert result.ret == 0
    n = xdist_default(pytester.parseconfig())
    result.stdout.fnmatch_lines([f"*created: {n}/{n} workers*"])


def xdist_default_workers(config) -> int:
    from xdist.plugin import pytest_xdist_auto_num_workers as xdist_default
    return xdist_default(config)


def test_n_auto_is_one_worker_per_gpu_where_there_are_gpus(pytester, monkeypatch):
    """On a GPU host, `-n auto` gives each GPU one worker (two workers on one GPU would time
    each other's kernels): the count is the CUDA driver's."""
    pytest.importorskip("xdist", reason="pytest-xdist not installed (extra: test)")
    from pytest_gpuchar.core import device
    monkeypatch.delenv("GPUCHAR_NO_GPU", raising=False)
    config = pytester.parseconfig("-n", "auto")
    # what pytest-xdist asks (the first answer of every plugin's pytest_xdist_auto_num_workers)
    auto = config.hook.pytest_xdist_auto_num_workers
    assert device.device_count() == 0 and auto(config=config) >= 1      # no GPU: per core
    monkeypatch.setattr(device, "device_count", lambda: 4)      # a host with four GPUs
    assert auto(config=config) == 4
    monkeypatch.setattr(device, "device_count", lambda: 1)      # one GPU: one worker
    assert auto(config=config) == 1
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    monkeypatch.setattr(device, "device_count", lambda: 4)
    assert auto(config=config) == xdist_default_workers(config)
