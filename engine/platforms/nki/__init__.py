"""NKI on AWS Trainium: the simulator, the performance model, the hardware backend, the evaluation roles,
the prompts and offline rewrites, and the NKIBench suite."""
