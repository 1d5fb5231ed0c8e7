"""The build step pyproject.toml cannot say: the distribution carries the characterisation
suite, the expectation files and the SASS snapshots, which the repository keeps at its top
(tests/characterisation/, expectations/) where its history, reviews and CI read them.

`build_py` copies them into the built package (never into the source tree):

- tests/characterisation/*.py  -> pytest_gpuchar/suite/ (+ an __init__.py: a package, so
  `pytest --pyargs pytest_gpuchar.suite` names it and its modules import as
  pytest_gpuchar.suite.test_*, clear of a user's own test_*.py);
- expectations/**.yaml         -> pytest_gpuchar/data/expectations/;
- tests/characterisation/__sass__/ -> pytest_gpuchar/data/sass.tar.xz (3,700 small text files,
  32 MB, are about 0.6 MB as one xz archive: a zip compresses each file alone).

The package finds them with pytest_gpuchar/core/locations.py. An editable install needs no
copy (the package runs from the checkout and reads the repository's own files)."""
from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SUITE = HERE / "tests" / "characterisation"
EXPECTATIONS = HERE / "expectations"
SUITE_INIT = ('"""The characterisation suite as installed with pytest-gpuchar: '
              '`pytest --gpuchar-suite` or\n`pytest --pyargs pytest_gpuchar.suite`."""\n')


def _write_archive(src: Path, dest: Path) -> None:
    """`src` (the __sass__ tree) as a reproducible tar.xz: names sorted, owner and times
    cleared, so two builds of one tree give the same bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in src.rglob("*") if p.is_file())
    with tarfile.open(dest, "w:xz", preset=9) as tar:
        for p in files:
            data = p.read_bytes()
            info = tarfile.TarInfo(f"{src.name}/{p.relative_to(src).as_posix()}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))


class BuildPyWithSuite(build_py):
    """build_py, then the suite, the expectation files and the snapshot archive."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for src in (SUITE, EXPECTATIONS):
            if not src.is_dir():
                raise SystemExit(f"setup.py: {src} is missing: build from a checkout or an "
                                 f"sdist of pytest-gpuchar (they carry it)")
        pkg = Path(self.build_lib) / "pytest_gpuchar"
        for old in (pkg / "suite", pkg / "data"):   # an earlier build's files: not this tree's
            shutil.rmtree(old, ignore_errors=True)
        suite = pkg / "suite"
        suite.mkdir(parents=True, exist_ok=True)
        (suite / "__init__.py").write_text(SUITE_INIT)
        for module in sorted(SUITE.glob("*.py")):
            self.copy_file(str(module), str(suite / module.name))
        for path in sorted(EXPECTATIONS.rglob("*.yaml")):
            out = pkg / "data" / "expectations" / path.relative_to(EXPECTATIONS)
            self.mkpath(str(out.parent))
            self.copy_file(str(path), str(out))
        _write_archive(SUITE / "__sass__", pkg / "data" / "sass.tar.xz")


setup(cmdclass={"build_py": BuildPyWithSuite})
