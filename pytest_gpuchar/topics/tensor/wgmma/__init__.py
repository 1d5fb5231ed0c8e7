"""wgmma in depth (issue 16): completion latency, concurrency to the peak, swizzles."""
