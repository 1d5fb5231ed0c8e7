"""Command-line tools: gpuchar-expectations, gpuchar-nightly, gpuchar-model-params."""
