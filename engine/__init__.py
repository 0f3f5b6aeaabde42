"""The engine: everything that evaluates and optimizes kernels, with no Django (docs/architecture.md).

Kept free of code: the sandbox child runs `python -m engine.evaluator.child`, which imports this first.
"""
