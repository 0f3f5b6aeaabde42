from __future__ import annotations

import pytest

from engine.agents.base import ProblemContext

REFERENCE = '''import numpy as np

def get_inputs():
    return [np.ones((4, 4), dtype=np.float32)]

def forward(x):
    return x * 2
'''


@pytest.fixture
def problem() -> ProblemContext:
    return ProblemContext(slug="double_mini", reference_source=REFERENCE, platform="trn1", family="elementwise")
