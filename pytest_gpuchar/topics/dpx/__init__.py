"""DPX (Hopper's dynamic-programming instructions): the CUDA intrinsics' PTX and SASS per arch,
their latency and throughput on sm_90."""
