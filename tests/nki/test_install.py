"""install(): the NKI namespaces for unmodified kernels, never over a real Neuron SDK."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.semantics import namespaces


@pytest.fixture
def installed():
    namespaces.install()
    yield
    namespaces.uninstall()


def test_unmodified_neuronxcc_kernels_import_and_run(installed, tmp_path):
    source = textwrap.dedent("""
        import numpy as np
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl
        import neuronxcc.nki.isa as nisa
        import neuronxcc.nki.typing as nt
        from neuronxcc.nki import trace
        from neuronxcc.nki.language import par_dim

        @nki.jit
        def kernel(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray((par_dim(128), 4), dtype=np.float32, buffer=nl.sbuf)
            t[...] = nl.load(a)
            nl.store(out, nisa.activation(op=nl.exp, data=t, engine=nki.isa.unknown_engine))
            return out
    """)
    path = tmp_path / "k.py"
    path.write_text(source)
    scope: dict = {}
    exec(compile(source, str(path), "exec"), scope)
    a = np.ones((128, 4), np.float32)
    np.testing.assert_allclose(simulate(scope["kernel"], [a]).outputs[0], np.exp(a))
    np.testing.assert_allclose(scope["kernel"](a), np.exp(a))  # calling the jit kernel simulates it


def test_top_level_nki_namespace_uses_destination_first_isa(installed):
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.activation(t, nl.exp, t)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.zeros((128, 4), np.float32)
    np.testing.assert_array_equal(kernel(a), np.ones((128, 4), np.float32))


def test_it_refuses_to_shadow_a_real_neuronxcc(tmp_path, monkeypatch):
    (tmp_path / "neuronxcc").mkdir()
    (tmp_path / "neuronxcc" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="refusing to shadow"):
        namespaces.install()
    assert "neuronxcc.nki" not in sys.modules
