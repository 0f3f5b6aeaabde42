"""Django implementations of the interfaces `engine.search` is written against, one module each:

    evaluation.py           DjangoEvaluator: Kernel rows evaluated through the benchmark app's cache;
                            RunCancelled (a cancel noticed while a step waits on evaluations)
    optimization_memory.py  DjangoOptimizationMemory: the memory app's select_entries / add_entry
    recorder.py             RunRecorder (EventSink and CheckpointStore in one: a step saves in one
                            transaction) and LostClaim
    problem.py              problem_context: the run's problem as the agents see it

The worker imports them from `optimizer.adapters`.
"""

from optimizer.adapters.evaluation import DjangoEvaluator, RunCancelled
from optimizer.adapters.optimization_memory import DjangoOptimizationMemory
from optimizer.adapters.problem import problem_context
from optimizer.adapters.recorder import LostClaim, RunRecorder

__all__ = ["DjangoEvaluator", "DjangoOptimizationMemory", "LostClaim", "RunCancelled", "RunRecorder",
           "problem_context"]
