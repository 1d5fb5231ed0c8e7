"""Reading a results report (gpuchar-results.json or nightly.json, plain or gzip-compressed):
one reader for every command, with one clear error naming the file."""
from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

ARTIFACTS = "artifacts"   # subdirectory of a report directory for plots and curves


class ResultsError(ValueError):
    """A results file that cannot be used: the message names the file and the problem."""


def read_report(path: Path) -> dict:
    """The report object of `path` (.gz or plain JSON, told apart by its first bytes)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ResultsError(f"{path}: cannot read: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ResultsError(f"{path}: not a readable gzip file ({e}); truncated?") from None
    if not raw.strip():
        raise ResultsError(f"{path}: empty file, not a gpuchar results report")
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        where = f":{e.lineno}" if isinstance(e, json.JSONDecodeError) else ""
        why = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8 text"
        raise ResultsError(f"{path}{where}: not valid JSON ({why}); truncated?") from None
    if not isinstance(doc, dict):
        raise ResultsError(f"{path}: not a gpuchar results report (expected a JSON object)")
    return doc


def read_results(path: Path) -> list[dict]:
    """The `results` list of a report, each entry checked for its key and arch."""
    results = read_report(path).get("results")
    if not isinstance(results, list) or not all(
            isinstance(r, dict) and "key" in r and "arch" in r for r in results):
        raise ResultsError(f"{path}: not a gpuchar results report (expected an object with a "
                           f"'results' list of {{key, arch, value, status, ...}})")
    return results
