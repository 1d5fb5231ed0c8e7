"""Plot output for the run's report: matplotlib on its non-interactive backend, written
atomically (a half-written PNG never lands in a report). Each topic draws its own figures and
saves them with `save`; a PNG gets an SVG twin beside it, which the HTML report inlines.

Laying a figure out and writing its PNG and SVG costs about ten times what building it does
(half a second for a tensor sweep's heatmap), and building it costs the first figure of a
process the import of pyplot, so a hardware run draws in the background:
`start_background()` makes `draw(build, path, *args)` hand the builder (a module-level
function returning a Figure) and its data to a pool of processes, which build and write the
figure, and `save(fig, path)` hand a figure already built (pickled); both return at once, and
`finish()` waits for every figure and says which could not be drawn or written. Without it
(the default, and for what does not pickle) both build and write in the caller's thread."""
from __future__ import annotations

import os
import pickle
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

from ..core.atomic import replacing


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def _plain(value, _pos) -> str:
    return f"{value:g}"


def plain_log_ticks(ax, *axes: str) -> None:
    """Tick labels of log axes as plain numbers ("1024", "0.001") instead of matplotlib's
    $10^{3}$: those go through mathtext, whose first parse builds a pyparsing grammar (about
    a second of a night's test thread, more while compiles run beside it)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    for name in axes or ("x", "y"):
        axis = ax.xaxis if name == "x" else ax.yaxis
        axis.set_major_formatter(FuncFormatter(_plain))     # (a function, so figures pickle)
        axis.set_minor_formatter(NullFormatter())


def save(fig, path: str | Path, *, dpi: int = 120) -> Path:
    """Write `fig` to `path` (format from the suffix) atomically and close it. A PNG gets an
    SVG twin (`<stem>.svg`, text as text, no date: the HTML report inlines it), both cropped
    to the one tight box (computed once: the two saves lay the figure out once each). While
    a background renderer runs, the files are written by it (`finish` waits for them)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if _background is not None and _background.submit(_as_built, (fig,), {}, path, dpi):
        pyplot().close(fig)
        return path
    _write(fig, path, dpi)
    return path


def draw(build: Callable[..., Any], path: str | Path, *args, dpi: int = 120, **kwargs) -> Path:
    """The figure `build(*args, **kwargs)` returns, written to `path` as `save` writes it;
    while a background renderer runs, built and written by it (`build` must be a module-level
    function and its arguments plain data, so they travel to another process)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if _background is not None and _background.submit(build, args, kwargs, path, dpi):
        return path
    return save(build(*args, **kwargs), path, dpi=dpi)


def _write(fig, path: Path, dpi: int) -> None:
    import matplotlib
    try:
        fig.canvas.draw()
        box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1)   # "tight", 0.1 in
        with replacing(path, suffix=path.suffix) as tmp:
            fig.savefig(tmp, dpi=dpi, bbox_inches=box)
        if path.suffix == ".png":
            with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": path.stem}):
                with replacing(path.with_suffix(".svg"), suffix=".svg") as tmp:
                    fig.savefig(tmp, bbox_inches=box, metadata={"Date": None})
    finally:
        pyplot().close(fig)


def _as_built(fig):
    """The builder of a figure the caller built (`save` in the background)."""
    return fig


def _draw_pickled(data: bytes, path: str, dpi: int) -> None:
    """In a renderer process: the figure from its builder and data (pyplot first: a pickled
    figure needs its backend), written as `save` would."""
    pyplot()
    build, args, kwargs = pickle.loads(data)
    _write(build(*args, **kwargs), Path(path), dpi)


def _ready() -> None:
    """In a renderer process, before any figure: pyplot imported (the first figure of a
    process paid it, a second or more on a busy host)."""
    pyplot()


class Renderer:
    """A pool of processes writing figures (spawned, not forked: the caller holds a CUDA
    context); `pending` maps each path to its write. Every process is started, and imports
    pyplot, as the pool starts: a run's first figures and the tests that wait for them
    (`written`) do not wait for it."""

    def __init__(self, workers: int):
        import multiprocessing
        self.pool = ProcessPoolExecutor(max_workers=workers,
                                        mp_context=multiprocessing.get_context("spawn"))
        self.pending: dict[Path, Future] = {}
        # one job per process, submitted at once: the pool starts a process for each
        self.warming = [self.pool.submit(_ready) for _ in range(workers)]

    def submit(self, build, args: tuple, kwargs: dict, path: Path, dpi: int) -> bool:
        """Queue a figure's builder and data (a built figure: `_as_built` and the figure);
        False when they cannot travel to another process (then the caller builds and writes
        it itself)."""
        try:
            data = pickle.dumps((build, args, kwargs))
        except Exception:      # a local function, an unpicklable artist (a lambda formatter)
            return False
        self.pending[path] = self.pool.submit(_draw_pickled, data, str(path), dpi)
        return True

    def wait(self) -> dict[str, str]:
        """Wait for every figure queued so far, the processes kept; {file name: why} for
        those not written."""
        failed = {}
        for path, job in self.pending.items():
            try:
                job.result()
            except Exception as e:     # the figure's own error, or a renderer process lost
                failed[path.name] = f"{type(e).__name__}: {e}"
        self.pending.clear()
        return failed

    def finish(self) -> dict[str, str]:
        """Wait for every queued figure and stop the processes; as `wait`."""
        failed = self.wait()
        self.pool.shutdown()
        return failed


_background: Renderer | None = None


def background_workers() -> int:
    """Renderer processes for a host: a quarter of its cores, 1 to 4 (the JIT and the
    offline compiles run beside them early in a run)."""
    return max(1, min(4, (os.cpu_count() or 1) // 4))


def start_background(workers: int | None = None) -> None:
    """From now on `save` writes through a pool of renderer processes (idempotent)."""
    global _background
    if _background is None:
        _background = Renderer(workers or background_workers())


def written(path: str | Path) -> Path:
    """`path` once its figure is on disk: waits for the background renderer's write of it
    (re-raising that write's error); at once when it was written in place."""
    path = Path(path)
    job = _background.pending.get(path) if _background is not None else None
    if job is not None:
        job.result()
    return path


def finish() -> dict[str, str]:
    """Wait for the background renderer's figures and stop it: {file name: why} for each
    figure it could not write ({} when none ran)."""
    global _background
    renderer, _background = _background, None
    return renderer.finish() if renderer is not None else {}
