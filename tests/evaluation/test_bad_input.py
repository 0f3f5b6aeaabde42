"""Every kind of bad input ends in one clear result with the right kind, and nothing else is disturbed."""

from __future__ import annotations

import textwrap

from engine.evaluator import ErrorKind, Limits, evaluate
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS, NUMPY_ADD_KERNEL


def run(kernel: str, reference: str = ADD_REFERENCE, **kwargs):
    kwargs.setdefault("limits", FAST_LIMITS)
    return evaluate(textwrap.dedent(kernel), reference, backend="null", **kwargs)


def test_a_correct_kernel_passes_on_every_seed() -> None:
    result = run(NUMPY_ADD_KERNEL)
    assert result.ok and result.correct and result.error_kind is None
    assert len(result.seeds) >= 3 and len(result.relative_l2_errors) == len(result.seeds)
    assert result.output_errors == (0.0,)


def test_a_syntax_error_is_rejected_with_its_line() -> None:
    result = run("import numpy as np\n\ndef kernel(a, b):\n    return a +* b\n")
    assert result.error_kind is ErrorKind.REJECTED
    assert result.error_line == 4
    assert not result.compiled


def test_a_source_without_a_kernel_is_rejected() -> None:
    result = run("import numpy as np\nVALUE = 3\n")
    assert result.error_kind is ErrorKind.REJECTED
    assert "no kernel function" in result.error_message


def test_a_forbidden_import_is_rejected_with_its_line() -> None:
    result = run("import numpy as np\nimport os\n\ndef kernel(a, b):\n    return a + b\n")
    assert result.error_kind is ErrorKind.REJECTED
    assert result.error_line == 2 and "'os'" in result.error_message


def test_a_kernel_that_raises_is_a_runtime_error_at_the_raising_line() -> None:
    result = run('''
        import numpy as np

        def kernel(a, b):
            scale = 2.0
            return np.matmul(a, b) * scale
    ''')
    assert result.error_kind is ErrorKind.RUNTIME_ERROR
    assert result.error_line == 6
    assert "matmul" in result.error_message
    assert "return np.matmul(a, b) * scale" in result.error_detail  # the author's traceback, with source
    assert result.compiled and not result.runnable


def test_a_wrong_output_shape_is_incorrect_and_names_both_shapes() -> None:
    result = run("import numpy as np\n\ndef kernel(a, b):\n    return (a + b)[:64]\n")
    assert result.error_kind is ErrorKind.INCORRECT
    assert "[64, 512]" in result.error_message and "[128, 512]" in result.error_message


def test_a_wrong_output_count_is_incorrect() -> None:
    result = run("import numpy as np\n\ndef kernel(a, b):\n    return a + b, a - b\n")
    assert result.error_kind is ErrorKind.INCORRECT
    assert "2 output(s)" in result.error_message


def test_wrong_values_are_incorrect_with_the_error_size() -> None:
    result = run("import numpy as np\n\ndef kernel(a, b):\n    return a + b * 1.01\n")
    assert result.error_kind is ErrorKind.INCORRECT and result.runnable and not result.correct
    assert "relative L2 error" in result.error_message
    (error,) = result.output_errors
    assert error is not None and 1e-3 < error < 1e-1


def test_a_kernel_that_never_finishes_times_out() -> None:
    result = run("def kernel(a, b):\n    while True:\n        pass\n",
                 limits=Limits(wall_seconds=3, cpu_seconds=30))
    assert result.error_kind is ErrorKind.TIMEOUT
    assert "3 s" in result.error_message
    assert result.wall_time_s < 15


def test_a_kernel_that_burns_cpu_hits_the_cpu_limit() -> None:
    result = run("def kernel(a, b):\n    while True:\n        pass\n", limits=Limits(wall_seconds=30, cpu_seconds=2))
    assert result.error_kind is ErrorKind.TIMEOUT
    assert "CPU" in result.error_message


def test_a_kernel_that_allocates_too_much_memory_hits_the_resource_limit() -> None:
    result = run('''
        import numpy as np

        def kernel(a, b):
            return np.ones((1 << 34,), dtype=np.float32)
    ''', limits=Limits(wall_seconds=20, memory_bytes=1024**3))
    assert result.error_kind is ErrorKind.RESOURCE_LIMIT
    assert result.is_kernel_result


def test_a_reference_with_a_syntax_error_is_reported_as_a_broken_reference() -> None:
    result = run(NUMPY_ADD_KERNEL, reference="def get_inputs(:\n    pass\n")
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR
    assert result.error_message.startswith("the reference is broken")
    assert result.error_line == 1
    assert not result.is_kernel_result


def test_a_reference_that_raises_is_reported_as_broken_not_as_the_kernels_fault() -> None:
    reference = ADD_REFERENCE.replace("return a + b", "return a @ b")
    result = run(NUMPY_ADD_KERNEL, reference=reference)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR
    assert "the reference is broken" in result.error_message and "matmul" in result.error_message
    assert result.attempts == 1  # a deterministic failure is not retried


def test_a_reference_missing_forward_is_broken() -> None:
    result = run(NUMPY_ADD_KERNEL, reference="import numpy as np\n\ndef get_inputs():\n    return []\n")
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR
    assert "forward" in result.error_message


def test_printing_from_a_kernel_does_not_corrupt_the_result() -> None:
    result = run('''
        import numpy as np

        def kernel(a, b):
            for i in range(2000):
                print("noise", i, a[0, :8])
            return a + b
    ''')
    assert result.correct


def test_an_enormous_output_is_refused_before_the_parent_reads_it() -> None:
    result = run('''
        import numpy as np

        def kernel(a, b):
            return np.ones((150, 1024, 1024), dtype=np.float32)
    ''', limits=Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=3 * 1024**3))
    assert result.error_kind is ErrorKind.RESOURCE_LIMIT
    assert "too large" in result.error_message
