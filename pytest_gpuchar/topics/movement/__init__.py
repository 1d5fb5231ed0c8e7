"""Hopper data movement (issue 15): clusters and distributed shared memory, TMA, async copies
and barriers, bandwidths, the L2 seen from every SM, latency under load."""
