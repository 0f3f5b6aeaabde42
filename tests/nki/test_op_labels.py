"""Every kind of instruction the simulator runs has the op labels it may carry (semantics/ops.py): a kind
missing from the table makes every kernel that uses it fail verification, which is how the NKI 0.6
instructions first met the label check."""

from __future__ import annotations

from engine.platforms.nki.simulator.semantics import semantics, semantics_v06  # noqa: F401 - registers the 0.6 kinds
from engine.platforms.nki.simulator.semantics.ops import FIXED_LABELS

# Kinds whose label follows their parameters (label_allowed's own rules), not a fixed set.
LABELLED_BY_PARAMETERS = {"binary", "unary", "activation", "reduce", "move"}
# Kinds that record no cost-trace row of their own (trace_check skips them): the zeros a matmul into a partly
# written PSUM tile starts from.
WITHOUT_A_ROW = {"keep_written"}


def test_every_kind_the_simulator_runs_has_the_labels_it_may_carry():
    missing = sorted(set(semantics.KINDS) - set(FIXED_LABELS) - LABELLED_BY_PARAMETERS - WITHOUT_A_ROW)
    assert not missing, f"kinds with no op label in semantics/ops.py (every kernel using them would be refused): {missing}"
