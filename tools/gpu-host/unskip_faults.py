"""A pytest plugin for the GPU-host harness (not the product): the mbarrier wait chains that
rows.ASYNC_FAULTS declares as faulting run anyway, to see whether they still fault
(issue 33 item 11). Use: PYTHONPATH=tools/gpu-host pytest -p unskip_faults ..."""


def pytest_configure(config):
    from pytest_gpuchar.topics.movement import rows
    config._gpuchar_unskipped = dict(rows.ASYNC_FAULTS)
    rows.ASYNC_FAULTS.clear()
