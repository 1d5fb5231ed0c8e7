"""Tensor-core numerics (seed 004 section 8, Fasi et al. 2021): what one mma.sync computes,
bit for bit, against exact CPU references."""
