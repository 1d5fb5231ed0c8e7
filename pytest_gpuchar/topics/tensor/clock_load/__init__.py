"""The SM clock under sustained load (idle, FFMA, wgmma, HBM streaming)."""
