"""Tensor cores (seed 003 Table III, seed 004 Tables 3-9 and Figs 6-7, Hopper wgmma): the SASS
each wmma / mma.sync / mma.sp / ldmatrix / wgmma becomes, and its latency and throughput over
ILP x warps per SM."""
