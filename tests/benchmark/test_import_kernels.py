"""Importing a folder of kernels at once: `manage.py import_kernels DIR` and POST /api/kernels/import.

Each file's problem comes from its NKIBench-style name (silu_M4096_N7168_0.py -> silu:full) unless one is
given; a file with no problem fails the whole batch, naming the file, before anything is stored."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from benchmark.models import Kernel
from benchmark.services.kernel_import import problem_for_file

KERNEL = "import neuronxcc.nki as nki\n\n@nki.jit\ndef kernel(x):\n    return x\n# {}\n"


@pytest.mark.parametrize(("name", "address"), [
    ("silu_M4096_N7168_0.py", "silu:full"),
    ("rope_single_freq_apply_B1_H64_N4096_D128_0.py", "rope_single_freq_apply:full"),
    ("silu.py", "silu:mini"),
    ("silu_3.py", "silu:mini"),
    ("silu_M1_N1_0.py", None),
    ("nothing_like_it.py", None),
])
def test_a_file_name_points_at_its_problem(nkibench, name, address):
    problem = problem_for_file(name, nkibench)
    assert (problem.address if problem else None) == address


def test_the_command_imports_every_file_and_evaluates_it(tmp_path, fake_pipeline, nkibench, engineer):
    (tmp_path / "silu_M4096_N7168_0.py").write_text(KERNEL.format("full"))
    (tmp_path / "matmul.py").write_text(KERNEL.format("mini"))
    call_command("import_kernels", str(tmp_path), user=engineer.username)
    kernels = {k.problem.address: k for k in Kernel.objects.filter(author=engineer)}
    assert set(kernels) == {"silu:full", "matmul:mini"}
    assert all(k.evaluations.get().correct for k in kernels.values())


def test_one_unmatched_file_imports_nothing_and_names_the_file(tmp_path, fake_pipeline, nkibench, engineer):
    (tmp_path / "silu_M4096_N7168_0.py").write_text(KERNEL.format("full"))
    (tmp_path / "mystery.py").write_text(KERNEL.format("?"))
    with pytest.raises(CommandError, match="mystery.py: no problem matches"):
        call_command("import_kernels", str(tmp_path), user=engineer.username)
    assert not Kernel.objects.filter(author=engineer).exists()


def test_the_api_imports_several_files_for_one_given_problem(client, bearer, fake_pipeline, nkibench, engineer):
    files = [SimpleUploadedFile(f"v{i}.py", KERNEL.format(i).encode()) for i in range(3)]
    response = client.post("/api/kernels/import", {"files": files, "problem": "silu:mini"}, headers=bearer(engineer))
    assert response.status_code == 201, response.content
    body = response.json()
    assert [item["problem"] for item in body] == ["silu:mini"] * 3 and all(item["created"] for item in body)


def test_the_api_refuses_a_file_that_is_not_text(client, bearer, nkibench, engineer):
    files = [SimpleUploadedFile("silu.py", b"\xff\xfe\x00binary")]
    response = client.post("/api/kernels/import", {"files": files}, headers=bearer(engineer))
    assert response.status_code == 400 and "silu.py: not UTF-8" in response.json()["detail"]


def test_the_api_needs_an_engineer(client, bearer, nkibench, viewer):
    files = [SimpleUploadedFile("silu.py", KERNEL.encode())]
    assert client.post("/api/kernels/import", {"files": files}, headers=bearer(viewer)).status_code == 403
