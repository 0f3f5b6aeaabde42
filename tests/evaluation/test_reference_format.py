"""NKIBench-format references: scalar parameters pass through untouched; a variant that breaks the
reference's own math falls back to the plain values for that seed, and the result says so."""

from __future__ import annotations

import textwrap

from engine.evaluator import ErrorKind, evaluate
from tests.evaluation.conftest import FAST_LIMITS

SCALED_ADD_REFERENCE = textwrap.dedent('''
    import numpy as np

    def get_inputs():
        x = np.random.normal(size=(128, 256)).astype(np.float32)
        eps = 1e-5
        return [x, eps]

    def forward(x, eps):
        return x + np.float32(eps)
''')

# Correct only if eps arrives as the Python float the reference produced, unscaled and never zeroed.
EPS_KERNEL = textwrap.dedent('''
    import numpy as np

    def kernel(x, eps):
        if type(eps) is not float or eps != 1e-5:
            return x
        return x + np.float32(eps)
''')

EXP_REFERENCE = textwrap.dedent('''
    import numpy as np

    def get_inputs():
        return [np.random.normal(size=(128, 256)).astype(np.float32)]

    def forward(x):
        return np.exp(x * 8).astype(np.float32)   # overflows to inf when the inputs are scaled
''')


def test_a_scalar_input_reaches_the_kernel_as_the_same_number() -> None:
    result = evaluate(EPS_KERNEL, SCALED_ADD_REFERENCE, backend="null", limits=FAST_LIMITS)
    assert result.correct, result.error_message


def test_a_variant_that_overflows_the_reference_is_checked_on_plain_values_instead() -> None:
    kernel = "import numpy as np\n\ndef kernel(x):\n    return np.exp(x * 8).astype(np.float32)\n"
    result = evaluate(kernel, EXP_REFERENCE, backend="null", limits=FAST_LIMITS)
    assert result.correct, result.error_message
    assert result.distributions == ("reference", "zeros", "reference")


def test_a_problem_can_opt_out_of_a_distribution_in_its_reference() -> None:
    reference = EXP_REFERENCE + '\nEVAL_DISTRIBUTIONS = ("reference",)\n'
    kernel = "import numpy as np\n\ndef kernel(x):\n    return np.exp(x * 8).astype(np.float32)\n"
    result = evaluate(kernel, reference, backend="null", limits=FAST_LIMITS)
    assert result.correct and result.distributions == ("reference", "reference", "reference")


def test_an_all_zero_reference_output_is_a_broken_reference() -> None:
    reference = SCALED_ADD_REFERENCE.replace("return x + np.float32(eps)", "return x * 0")
    kernel = "import numpy as np\n\ndef kernel(x, eps):\n    return np.zeros_like(x)\n"
    result = evaluate(kernel, reference, backend="null", limits=FAST_LIMITS)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR
    assert "all zeros for every seed" in result.error_message
