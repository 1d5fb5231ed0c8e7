"""The tensor-core sweeps: wmma (003 Table III), mma.sync, mma.sp, ldmatrix (004 Tables 3-9)
and Hopper wgmma rows over ILP x warps per SM."""
