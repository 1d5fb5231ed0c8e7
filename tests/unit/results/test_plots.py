"""Plots written in the background (results/plots.py): the files a renderer process writes are
the files the caller would have written; a figure that cannot travel is written in place; one
that cannot be drawn is named, with its reason, in the artifact list and the report."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_gpuchar.results import plots
from pytest_gpuchar.results.report import Recorder


def _log_curve(title: str = "bytes per clock over size"):
    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.loglog([1024, 4096, 65536, 1 << 20], [12.5, 30.1, 60.2, 61.0], marker="o")
    plots.plain_log_ticks(ax)
    ax.set_title(title)
    return fig


def _tensor_heatmap():
    from pytest_gpuchar.topics.tensor.mma import plots as tensor_plots
    from pytest_gpuchar.topics.tensor.mma.analysis import SweepPoint
    pts = {(w, i): SweepPoint(w, i, 30.0 + w, 100.0 * w / i, 0.1, 0.1, False, "", 1000,
                              False, 0.0, (1, 2, 3), 4, "")
           for w in (1, 4, 8) for i in (1, 2, 4)}
    return tensor_plots.heatmap(pts, "mma f16.f32.m16n8k16 on sm_90", "FMA/clk/SM")


@pytest.fixture(scope="module")
def _renderer_of_the_module():
    """The module's tests share one renderer process (a start imports pyplot in a fresh
    interpreter: about a second of CPU); stopped after the last."""
    yield
    plots.finish()


@pytest.fixture
def renderer(_renderer_of_the_module) -> plots.Renderer:
    """The background renderer, started again after a test that stopped it; each test's
    figures are waited for after it."""
    plots.start_background(1)
    yield plots._background
    if plots._background is not None:
        plots._background.wait()


def test_the_background_writes_what_the_caller_would(tmp_path, renderer):
    """PNG and SVG twin of two kinds of plot (log axes with plain ticks, a heatmap with its
    colour bars): the SVG byte for byte, the PNG too."""
    background = [plots.save(_log_curve(), tmp_path / "bg" / "curve.png"),
                  plots.save(_tensor_heatmap(), tmp_path / "bg" / "heat.png")]
    plots._write(_log_curve(), tmp_path / "curve.png", 120)
    plots._write(_tensor_heatmap(), tmp_path / "heat.png", 120)
    assert renderer.wait() == {}
    for path in background:
        for suffix in (".png", ".svg"):
            made = path.with_suffix(suffix)
            assert made.read_bytes() == (tmp_path / made.name).read_bytes(), made.name


def _builders():
    """Every topic figure drawn through `draw`: (name, builder, arguments), plain data."""
    import numpy as np
    from pytest_gpuchar.topics.memory.analysis import Geometry, Knee
    from pytest_gpuchar.topics.memory.plots import plot_staircase
    from pytest_gpuchar.topics.movement import plots as mv
    from pytest_gpuchar.topics.numerics.fp8_run import k_error_figure
    from pytest_gpuchar.topics.numerics.plots import chain_figure
    from pytest_gpuchar.topics.numerics.reference import ChainCurve
    from pytest_gpuchar.topics.tensor.clock_load.run import trace_figure
    from pytest_gpuchar.topics.tensor.mma import plots as tensor_plots
    from pytest_gpuchar.topics.tensor.wgmma.run import depth_figure
    from pytest_gpuchar.topics.tensor.mma.analysis import SweepPoint
    pts = {(w, i): SweepPoint(w, i, 30.0 + w, 100.0 * w / i, 0.1, 0.1, False, "", 1000,
                              False, 0.0, (1, 2, 3), 4, "") for w in (1, 4) for i in (1, 2)}
    ks = {32: 1e-7, 512: 3e-7, 4096: 9e-7}
    curve = ChainCurve("f16", "low", 8, [1e-4, 2e-4, 4e-4], [0.0, 0.0, 0.5])
    geometry = Geometry(l1_bytes=256 << 10, l2_bytes=50 << 20, free_bytes=None)
    return [
        ("heat", tensor_plots.heatmap, (pts, "mma", "FMA/clk/SM")),
        ("trace", trace_figure, ([("idle", [1980.0, 1975.0]), ("ffma", [1800.0])], 0.25)),
        ("chain", chain_figure, ([curve], "chain")),
        ("kerr", k_error_figure, ("e4m3", "sm_90", ks, {"f32 accumulation": ks})),
        ("depth", depth_figure, ("m64n8k16", "sm_90", [([1, 2], [0.4, 0.8], False, "1 in flight")])),
        ("stairs", mv.staircase_figure, (["shared", "l2"], [120.0, 40.0], "staircase")),
        ("tma", mv.tma_sizes_figure, ([1024, 4096], [10.0, 20.0], "tma")),
        ("l2map", mv.heatmap_figure, (np.arange(12.0).reshape(3, 4), "l2")),
        ("loaded", mv.loaded_figure, ([100.0, 900.0], [600.0, 800.0], [1, 66], "loaded")),
        ("memory", plot_staircase, ([1024, 4096, 1 << 20], [30.0, 31.0, 200.0],
                                    [Knee(2048, 8192, 30.0, 200.0)], geometry, "memory")),
    ]


def test_draw_builds_in_the_background_what_the_caller_would(tmp_path, renderer):
    """Each topic's figure built and written by a renderer process from its builder and
    data: the same PNG and SVG as building and writing it in place."""
    drawn = [plots.draw(build, tmp_path / "bg" / f"{name}.png", *args)
             for name, build, args in _builders()]
    assert plots._background.pending
    for name, build, args in _builders():       # while the renderer draws its own
        plots._write(build(*args), tmp_path / f"{name}.png", 120)
    assert renderer.wait() == {}
    for (name, build, args), path in zip(_builders(), drawn):
        for suffix in (".png", ".svg"):
            assert path.with_suffix(suffix).read_bytes() == \
                (tmp_path / f"{name}{suffix}").read_bytes(), name


def test_a_builder_that_does_not_pickle_is_built_in_place(tmp_path, renderer):
    """Built in the caller's thread; the figure, which pickles, still written by the
    renderer."""
    path = plots.draw(lambda title: _log_curve(title), tmp_path / "local.png", "in place")
    assert list(plots._background.pending) == [path]
    assert renderer.wait() == {}
    assert path.is_file() and path.with_suffix(".svg").is_file()


def test_a_figure_that_does_not_pickle_is_written_in_place(tmp_path, renderer):
    from matplotlib.ticker import FuncFormatter
    fig = _log_curve()
    fig.axes[0].xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0f} B"))
    path = plots.save(fig, tmp_path / "lambda.png")
    assert path.is_file() and path.with_suffix(".svg").is_file()    # before finish()
    assert plots._background.pending == {}
    assert renderer.wait() == {}


def test_a_figure_that_cannot_be_drawn_is_named_in_the_report(tmp_path, renderer):
    """Its files are not there, half or whole; its artifact entry and the report say why."""
    from pytest_gpuchar.plugin import _finish_plots
    good = plots.save(_log_curve(), tmp_path / "good.png")
    plots.save(_log_curve(r"$\notacommand{x}$"), tmp_path / "bad.png")   # mathtext fails
    rec = Recorder()
    rec.add_artifact("good.png", "a curve", "test_a")
    rec.add_artifact("bad.png", "a broken curve", "test_b")
    _finish_plots(SimpleNamespace(recorder=rec))
    assert good.is_file() and good.with_suffix(".svg").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.png", "good.svg"]
    why = rec.meta["artifacts_failed"]["bad.png"]
    assert why.startswith("ValueError") and "notacommand" in why
    assert rec.artifacts[1]["error"] == why and "error" not in rec.artifacts[0]
    assert "bad.png was not written: ValueError" in rec.markdown()


def test_the_renderer_starts_its_processes_with_pyplot_imported():
    """Every renderer process is started as the pool starts and has imported pyplot before
    the first figure is handed to it."""
    renderer = plots.Renderer(2)
    try:
        assert len(renderer.warming) == 2
        for job in renderer.warming:
            assert job.result(timeout=300) is None
        assert len(renderer.pool._processes) == 2
    finally:
        assert renderer.finish() == {}


def test_without_a_renderer_save_writes_at_once(tmp_path):
    plots.finish()                  # (the module's renderer, if an earlier test started it)
    assert plots._background is None and plots.finish() == {}
    path = plots.save(_log_curve(), tmp_path / "now.png")
    assert path.is_file() and path.with_suffix(".svg").is_file()


def test_workers_are_a_quarter_of_the_cores_one_to_four(monkeypatch):
    import os
    for cores, workers in ((None, 1), (2, 1), (8, 2), (16, 4), (128, 4)):
        monkeypatch.setattr(os, "cpu_count", lambda c=cores: c)
        assert plots.background_workers() == workers


def test_written_waits_for_the_file_and_says_why_it_is_not_there(tmp_path, renderer):
    path = plots.save(_log_curve(), tmp_path / "wait.png")
    assert plots.written(path).is_file()
    bad = plots.save(_log_curve(r"$\notacommand{x}$"), tmp_path / "bad.png")
    with pytest.raises(ValueError, match="notacommand"):
        plots.written(bad)
    assert plots.written(tmp_path / "never-queued.png") == tmp_path / "never-queued.png"
