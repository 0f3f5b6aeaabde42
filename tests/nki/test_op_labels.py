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


def test_labels_that_may_stand_for_one_instruction_are_priced_alike():
    """The model prices by op name, and a recorded label is the kernel's choice among those the verifier accepts
    for what runs: each such choice must cost the same, or a kernel buys a price by its label (issue 35)."""
    from engine.platforms.nki.simulator.semantics.ops import cost_classes, interchangeable_labels

    apart = {}
    for kind in sorted(set(semantics.KINDS)):
        for group in interchangeable_labels(kind):
            classes = {op: sorted(cost_classes(op)) for op in sorted(group)}
            if len({tuple(c) for c in classes.values()}) > 1:
                apart[kind] = classes
    assert not apart, f"labels of one instruction priced apart: {apart}"
    assert interchangeable_labels("reduce") and interchangeable_labels("convert")  # the two pairs issue 35 found
