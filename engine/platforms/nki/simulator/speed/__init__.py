"""Making the simulator fast without changing what it computes: split loops, recycled blocks, pinned BLAS."""
