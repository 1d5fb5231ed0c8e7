"""What a run produces: expectation files, judged results, reports, snapshots, plots."""
