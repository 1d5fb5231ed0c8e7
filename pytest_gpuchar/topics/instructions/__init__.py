"""Instruction tables (seed 003 Tables I, II, V): PTX instructions, the SASS they become, their
latency and cycles per instruction."""
