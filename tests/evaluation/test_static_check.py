"""The static check refuses what a kernel may not do, naming the line, before anything runs."""

from __future__ import annotations

import textwrap

import pytest

from engine.evaluator.static_check import MAX_SOURCE_BYTES, StaticCheckError, check_kernel_source

NKI_HEADER = textwrap.dedent('''
    import numpy as np
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.isa as nisa
    from neuronxcc import nki as nki2
    from neuronxcc.nki.language import par_dim
''')


def rejected(source: str, kernel_name: str | None = None) -> StaticCheckError:
    with pytest.raises(StaticCheckError) as caught:
        check_kernel_source(textwrap.dedent(source), kernel_name)
    return caught.value


def test_it_accepts_an_nki_kernel_with_the_usual_imports() -> None:
    source = NKI_HEADER + textwrap.dedent('''
        @nki.jit
        def add_kernel(a, b):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.add(nl.load(a), nl.load(b)))
            return out
    ''')
    assert check_kernel_source(source).kernel_name == "add_kernel"


def test_it_prefers_a_function_named_kernel_and_honours_a_given_name() -> None:
    source = "import numpy as np\n\ndef helper(x):\n    return x\n\ndef kernel(x):\n    return helper(x)\n"
    assert check_kernel_source(source).kernel_name == "kernel"
    assert check_kernel_source(source, "helper").kernel_name == "helper"


def test_it_reports_a_syntax_error_with_its_line() -> None:
    error = rejected("import numpy as np\n\ndef kernel(x):\n    return x +\n")
    assert error.line == 4
    assert "syntax error" in error.message


def test_it_rejects_source_without_a_kernel_function() -> None:
    error = rejected("import numpy as np\nx = 1\n")
    assert "no kernel function" in error.message


def test_it_rejects_a_missing_named_kernel_listing_what_exists() -> None:
    error = rejected("def kernel(x):\n    return x\n", kernel_name="fast_kernel")
    assert "'fast_kernel'" in error.message and "kernel" in error.message


@pytest.mark.parametrize("statement", ["import os", "import subprocess", "from sys import modules",
                                       "import numpy.ctypeslib", "import torch", "from . import sibling"])
def test_it_rejects_imports_outside_numpy_math_and_nki(statement: str) -> None:
    error = rejected(f"import numpy as np\n{statement}\n\ndef kernel(x):\n    return x\n")
    assert error.line == 2


@pytest.mark.parametrize("call", ["open('/etc/passwd')", "exec('x = 1')", "eval('1')", "compile('1', 'f', 'eval')",
                                  "__import__('os')", "globals()"])
def test_it_rejects_builtins_that_escape_the_kernel(call: str) -> None:
    error = rejected(f"def kernel(x):\n    y = {call}\n    return x\n")
    assert error.line == 2


@pytest.mark.parametrize("expression", ["x.__class__", "x.__class__.__mro__", "getattr(x, '__dict__')",
                                        "np.load('answer.npy')", "np.fromfile('/proc/self/environ')",
                                        "x.tofile('out')", "(lambda: 0).gi_frame", "np._core._internal",
                                        "np.matrixlib.defmatrix.ast.sys.modules", "getattr(np, name)"])
def test_it_rejects_dunder_and_file_attribute_access(expression: str) -> None:
    error = rejected(f"import numpy as np\n\ndef kernel(x):\n    y = {expression}\n    return x\n")
    assert error.line == 4


def test_it_allows_nl_load_which_is_an_nki_operation() -> None:
    source = NKI_HEADER + "\n@nki.jit\ndef kernel(x):\n    return nl.load(x)\n"
    assert check_kernel_source(source).kernel_name == "kernel"


def test_it_allows_a_parameter_named_like_a_builtin() -> None:
    assert check_kernel_source("def kernel(input):\n    return input\n").kernel_name == "kernel"


def test_it_ignores_a_main_block_that_never_runs_in_the_evaluator() -> None:
    source = "import numpy as np\n\ndef kernel(x):\n    return x\n\nif __name__ == '__main__':\n    import torch\n"
    assert check_kernel_source(source).kernel_name == "kernel"


def test_it_rejects_source_over_256_kib() -> None:
    source = "def kernel(x):\n    return x\n" + "#" * MAX_SOURCE_BYTES
    error = rejected(source)
    assert "256 KiB" in error.message


@pytest.mark.parametrize("statement", ["nl.add = nl.subtract", "np.asarray = list", "del nl.load",
                                       "np.random.seed = print"])
def test_it_rejects_rebinding_what_a_module_exports(statement: str) -> None:
    source = NKI_HEADER + f"\n@nki.jit\ndef kernel(x):\n    {statement}\n    return x\n"
    error = rejected(source)
    assert "not allowed" in error.message and error.line == source.count("\n") - 1
