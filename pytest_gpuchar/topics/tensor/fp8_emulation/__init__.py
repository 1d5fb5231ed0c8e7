"""The FP8 mma.sync emulation on sm_90 against the native FP8 wgmma."""
