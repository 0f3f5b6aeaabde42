"""Triton kernels on NVIDIA GPUs in FlashInfer-Bench's formats (issue 24): the pure evaluation core.

Needs only numpy, PyTorch and Triton (no Django), so `measurements/gpu_check.py` runs on a bare GPU machine.
Modules: flashinfer (the JSON formats), inputs (seeded inputs), runner (loading and guarded calls), compare
(tolerances), roofline (FLOPs, bytes, fraction of peak), timing (CUDA events, L2 flush), local (one case,
in-process), catalog (our sample definitions, workloads and solutions). Importing this package imports
nothing heavy; torch loads with the modules that need it.
"""
