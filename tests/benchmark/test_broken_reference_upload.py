"""A user's broken reference is the user's (issue 32): checked at upload by running it once in the evaluation
sandbox, refused on the upload page with its error and line, and no private problem (nor kernel) is left."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile

from benchmark import services
from benchmark.models import Evaluation, Kernel, Problem

pytestmark = pytest.mark.django_db
KERNEL = "import neuronxcc.nki as nki\n\n@nki.jit\ndef kernel(x):\n    return x\n"
GOOD = ("import numpy as np\n\nOUTPUT_SHAPES = [(4, 8)]\n\n\ndef get_inputs():\n"
        "    return [np.ones((4, 8), np.float32)]\n\n\ndef forward(x):\n    return x * 2\n")
SYNTAX = "import numpy as np\n\ndef get_inputs(:\n    return []\n\ndef forward(x):\n    return x\n"
RAISES = ("import numpy as np\n\n\ndef get_inputs():\n    return [np.ones((4, 8), np.float32)]\n\n\n"
          "def forward(x):\n    scale = 1\n    raise ValueError('scale missing')\n")  # line 10
WRONG_SHAPE = GOOD.replace("return x * 2", "return (x * 2).reshape(-1)")
NOT_AN_ARRAY = GOOD.replace("OUTPUT_SHAPES = [(4, 8)]\n", "").replace("return x * 2", "return None")
IMPORT_FAILS = "import numpy as np\nimport not_a_module_anywhere\n\ndef get_inputs():\n    return []\n\ndef forward():\n    return 1\n"


def _upload(client, engineer, reference: str):
    client.force_login(engineer)
    return client.post("/kernels/upload/", {
        "reference_file": SimpleUploadedFile("mine.py", reference.encode()), "platform": "trn1", "source": KERNEL,
    })


def _nothing_stored() -> bool:
    return not Problem.objects.filter(suite="custom").exists() and not Kernel.objects.exists() \
        and not Evaluation.objects.exists()


@pytest.mark.parametrize(("reference", "shown"), [
    (SYNTAX, "line 3 of the reference: syntax error in the reference"),
    (RAISES, "line 10 of the reference: the reference failed to render inputs: ValueError: scale missing"),
    (WRONG_SHAPE, "forward() returned shapes [(32,)]; the reference declares OUTPUT_SHAPES = [(4, 8)]"),
    (NOT_AN_ARRAY, "forward() output 0 is not a numeric array"),
    (IMPORT_FAILS, "line 2 of the reference: loading the reference failed: ModuleNotFoundError"),
], ids=["syntax_error", "raises_at_line_10", "wrong_shape", "not_an_array", "import_fails"])
def test_the_upload_page_refuses_a_broken_reference_with_its_error_and_line(client, engineer, reference, shown):
    response = _upload(client, engineer, reference)
    assert response.status_code == 200  # the form again, not a redirect to a kernel
    html = response.content.decode().replace("&#x27;", "'").replace("&quot;", '"')
    assert "your reference file is broken, so no problem was made from it" in html
    assert shown in html, html[html.find("form-errors"):][:1500]
    assert _nothing_stored()


def test_a_working_reference_becomes_a_private_problem_measured_by_the_same_run(engineer, fake_pipeline):
    kernel, created, evaluation = services.upload_kernel(engineer, kernel_source=KERNEL, platform="trn1",
                                                         reference_source=GOOD, reference_name="mine.py")
    assert created and kernel.problem.suite == "custom" and kernel.problem.owner == engineer
    assert kernel.problem.hbm_bytes == 2 * 4 * 8 * 4  # its input and its output, float32


def test_a_kernel_refused_after_the_reference_passed_leaves_no_problem(engineer):
    with pytest.raises(ValidationError, match="the kernel source is empty"):
        services.upload_kernel(engineer, kernel_source="   ", platform="trn1", reference_source=GOOD,
                               reference_name="mine.py")
    assert _nothing_stored()
