"""Throughput and launch costs (seeds 001 and 002): FMA and functional-unit throughput per SM
on the whole GPU, bar.sync overhead, warp and block launch overhead and the issue cycle."""
