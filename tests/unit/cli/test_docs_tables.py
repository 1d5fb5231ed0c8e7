"""docs/ tables that quote measured figures are generated from the committed runs
(cli/docs_tables.py, results/docblocks.py): they fail here when the docs and the result files
differ, with the command that fixes them."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_gpuchar.cli import docs_tables
from pytest_gpuchar.results import docblocks

ROOT = docs_tables.ROOT


def test_the_docs_tables_are_those_of_the_committed_runs():
    off = docs_tables.drifted(ROOT)
    assert not off, (f"{', '.join(off)} differ from the committed runs "
                     f"(results/sm_90/*): run {docs_tables.COMMAND}")


def test_the_generated_tables_quote_the_committed_figures():
    """Spot checks against the files themselves: the H100 night 2's Accel-Sim options (243 /
    407, issue 33) and its DRAM read fraction; no hand-typed board is left in the blocks."""
    docs = {d: (ROOT / d).read_text() for d in docs_tables.BLOCKS}
    example = docblocks.blocks(docs["docs/models.md"])["accel-sim-example"].body
    assert "-gpgpu_l2_rop_latency 243" in example and "-dram_latency 407" in example
    assert "  #" not in example                      # comments dropped
    boards = docblocks.blocks(docs["docs/movement.md"])["movement-boards"].body
    assert "| device memory read / write / copy, of the datasheet peak |" in boards
    assert "0.926 / 0.930 / 0.832 |" in boards          # H100 n2's own fractions
    assert "GPU-fa334b31" in boards and "GPU-8dcbdf20" in boards
    bsp = docblocks.blocks(docs["docs/models.md"])["bsp-hopper"].body
    assert "| KNN | 2^24 | 160,436 | 39,528 | -75.4% | -75.7% | shared_lat |" in bsp


@pytest.fixture
def project(tmp_path):
    for doc in docs_tables.BLOCKS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    (tmp_path / "results").symlink_to(ROOT / "results")
    return tmp_path


def test_check_fails_on_a_hand_edit_and_write_restores_it(project, capsys):
    doc = project / "docs/models.md"
    doc.write_text(doc.read_text().replace("-dram_latency 407", "-dram_latency 411"))
    assert docs_tables.main(["--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert "differs from the committed runs: docs/models.md: accel-sim-example" in out
    assert docs_tables.COMMAND in out
    assert docs_tables.main(["--root", str(project), "--write"]) == 0
    assert "-dram_latency 407" in doc.read_text()
    assert docs_tables.main(["--root", str(project)]) == 0
    assert (project / "docs/movement.md").read_text() == (ROOT / "docs/movement.md").read_text()


def test_a_missing_block_or_run_file_is_an_error_naming_it(project, capsys):
    doc = project / "docs/movement.md"
    doc.write_text(doc.read_text().replace("<!-- end generated: movement-boards -->", ""))
    assert docs_tables.main(["--root", str(project)]) == 2
    err = capsys.readouterr().err
    assert "docs/movement.md:" in err and "'movement-boards' has no end marker" in err


def test_blocks_replace_and_drift():
    text = "a\n" + docblocks.start_marker("t", "cmd") + "\nold\n<!-- end generated: t -->\nz"
    assert docblocks.blocks(text)["t"].body == "old"
    new = docblocks.replace(text, "t", "new 1\nnew 2\n")
    assert new == text.replace("\nold\n", "\nnew 1\nnew 2\n")
    assert docblocks.drift(new, {"t": "new 1\nnew 2"}) == []
    assert docblocks.drift(text, {"t": "new"}) == ["t"]
    with pytest.raises(docblocks.BlockError, match="no generated block 'u'"):
        docblocks.replace(text, "u", "x", "doc.md")
    twice = text + "\n" + docblocks.start_marker("t", "cmd")
    with pytest.raises(docblocks.BlockError, match=r"doc.md:6: generated block 't' also at line 2"):
        docblocks.blocks(twice, "doc.md")
