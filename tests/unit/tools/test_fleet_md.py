"""tools/fleet_md.py (results/sm_90/fleet.md): each board under its role, and the notes under
the table: a line of the notes file, else the hold-out row's own note."""
from __future__ import annotations

import importlib.util
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2].parent / "tools" / "fleet_md.py"
spec = importlib.util.spec_from_file_location("fleet_md", TOOL)
fm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fm)

SAMPLE = [{"uuid": "GPU-aaaa0000-1111", "device": "NVIDIA H200", "runs": 2,
           "dates": "2026-11-23", "exits": "0"},
          {"uuid": "GPU-bbbb0000-2222", "device": "NVIDIA H200", "runs": 1,
           "dates": "2026-11-28", "exits": "1"}]


def _holdout(uuid: str, exits: tuple[int, int, int], note: str = "") -> dict:
    row = {"uuid": uuid, "device": "NVIDIA H200", "date": "2026-12-02"}
    for k, code in zip(("readme", "night1", "night2"), exits):
        row[f"{k}_exit"], row[f"{k}_wall_s"] = code, 60
    return {**row, "note": note} if note else row


def test_roles_counts_and_the_notes_of_either_source():
    holdout = [_holdout("GPU-bbbb0000-2222", (0, 1, 0)),                  # then joined
               _holdout("GPU-cccc0000-3333", (0, 0, 0), "exit 0 three times (its own note)"),
               _holdout("GPU-dddd0000-4444", (0, 0, 2), "its own note, overridden")]
    text = fm.markdown(SAMPLE, holdout, {}, {"GPU-dddd0000-4444": "the notes file's line"})
    # two sample boards (one of them a hold-out whose runs joined: counted as sample only),
    # two hold-outs, one of them exit 0 three times
    assert "| NVIDIA H200 | 2 | 2 | 1 | 1 |" in text
    assert "| GPU-bbbb0000-2222 | NVIDIA H200 | hold-out, then sample | 2026-12-02 | " \
           "0 (60) | 1 (60) | 0 (60) |" in text
    assert "GPU-bbbb0000-2222 | NVIDIA H200 | sample" not in text
    assert "- GPU-cccc0000: exit 0 three times (its own note)" in text
    assert "- GPU-dddd0000: the notes file's line" in text
    assert "its own note, overridden" not in text
