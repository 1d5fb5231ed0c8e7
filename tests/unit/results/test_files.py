"""results.files: one reader for plain and gzip-compressed reports."""
from __future__ import annotations

import gzip
import json

import pytest

from pytest_gpuchar.results.files import ResultsError, read_report, read_results

REPORT = {"meta": {}, "results": [{"key": "latency.add.u32", "arch": "sm_90", "value": 4.0}]}


@pytest.mark.parametrize("gz", [False, True])
def test_plain_and_gzip_reports_read_alike(tmp_path, gz):
    raw = json.dumps(REPORT).encode()
    path = tmp_path / ("r.json.gz" if gz else "r.json")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    assert read_report(path) == REPORT and read_results(path) == REPORT["results"]


@pytest.mark.parametrize("content, why", [
    (b"", "empty file"), (b'{"results": [', "not valid JSON"),
    (gzip.compress(b'{"results": [', mtime=0)[:-6], "gzip"), (b"\xff\xfe", "not valid JSON"),
    (b'{"results": [{"value": 1}]}', "not a gpuchar results report")])
def test_a_bad_report_names_the_file_and_the_problem(tmp_path, content, why):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ResultsError, match=why) as e:
        read_results(path)
    assert str(path) in str(e.value)
