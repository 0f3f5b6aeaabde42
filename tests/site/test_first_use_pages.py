"""What a newcomer meets first (issue 32): the home page's two actions, a navigation without pages the visitor
cannot open, a kernel page saying who can read its source, forms that offer what fits and say everything that
is missing at once, and no Plotly on a page that draws no chart."""

from __future__ import annotations

import re

import pytest

from benchmark.models import Kernel, KernelOrigin, Problem, Visibility
from benchmark.services import source_sha256
from tests.pages.conftest import problem  # noqa: F401 - a public NKI problem with a baseline
from tests.triton_django.conftest import triton_problem  # noqa: F401

pytestmark = pytest.mark.django_db


def _nav(html: str) -> list[str]:
    nav = re.search(r'<nav class="site-nav".*?</nav>', html, re.S).group(0)
    return re.findall(r">([^<]+)</a>", nav)


def test_home_leads_to_upload_and_launch(client):
    html = client.get("/").content.decode()
    assert 'data-testid="home-upload" href="/kernels/upload/"' in html
    assert 'data-testid="home-launch" href="/runs/new/"' in html
    assert html.index("home-upload") < html.index("<h2>Browse</h2>")  # before the list of sections


def test_memory_is_offered_only_to_those_who_can_open_it(client, viewer, engineer):
    assert "Memory" not in _nav(client.get("/").content.decode())
    client.force_login(viewer)
    assert "Memory" not in _nav(client.get("/").content.decode())
    client.force_login(engineer)
    assert "Memory" in _nav(client.get("/").content.decode())
    assert client.get("/memory/").status_code == 200


def test_a_kernel_page_says_who_can_see_its_source(client, problem, engineer):  # noqa: F811
    html = client.get(f"/kernels/{problem.baseline_kernel_id}/").content.decode()
    assert re.search(r'data-testid="source-audience">Everyone, including visitors who are not signed in', html)
    private = Problem.objects.create(suite="custom", slug="mine", case="mini", reference_source="# ref",
                                     visibility=Visibility.PRIVATE, owner=engineer)
    kernel = Kernel.objects.create(problem=private, source="# k\n", sha256=source_sha256("# k\n"),
                                   origin=KernelOrigin.UPLOADED, author=engineer)
    client.force_login(engineer)
    html = client.get(f"/kernels/{kernel.pk}/").content.decode()
    assert "Only erin and the site&#x27;s admins" in html


def test_the_operations_guide_is_served_for_the_forms_links(client):
    response = client.get("/docs/operations/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("# Operations")
    assert client.get("/docs/..%2Fsecret_key/").status_code == 404
    assert client.get("/docs/nothing/").status_code == 404


def test_a_leaderboard_without_a_chart_does_not_load_plotly(client):
    html = client.get("/leaderboard/").content.decode()
    assert "leaderboard-chart" not in html and "plotly" not in html


def test_the_empty_upload_form_reports_every_missing_field_at_once(client, engineer, problem):  # noqa: F811
    client.force_login(engineer)
    html = client.post("/kernels/upload/", {"platform": "trn1"}).content.decode()
    errors = re.findall(r'<small class="error">([^<]+)</small>', html)
    assert errors == ["choose a problem, or upload your own reference file", "upload a kernel file or paste its source"]
    assert html.count('class="field has-error"') == 2


def test_the_run_form_tags_its_options_for_the_filter(client, engineer, problem, triton_problem):  # noqa: F811
    mine = Kernel.objects.create(problem=problem, source="# mine\n", sha256=source_sha256("# mine\n"),
                                 origin=KernelOrigin.UPLOADED, author=engineer, name="mine")
    client.force_login(engineer)
    html = client.get("/runs/new/").content.decode()
    assert f'value="{triton_problem.pk}" data-language="triton"' in html
    assert f'value="{mine.pk}" data-problem="{problem.pk}"' in html
    assert re.search(r'value="h100" data-language="triton" data-default-backend="triton-interpreter"', html)
    assert "optimizer/run_form" in html
    # The backend's help: one sentence linking to the operations guide, not the list of every reason.
    help_text = re.search(r'id="id_backend".*?<small class="help">(.*?)</small>', html, re.S).group(1)
    assert help_text.count(". ") == 0 and 'href="/docs/operations/"' in help_text


def test_a_run_form_opened_for_a_triton_problem_starts_on_its_platform(client, engineer, triton_problem):  # noqa: F811
    client.force_login(engineer)
    html = client.get(f"/runs/new/?problem={triton_problem.pk}").content.decode()
    assert re.search(r'<option value="h100"[^>]*selected', html)
    assert re.search(r'<option value="triton-interpreter"[^>]*selected', html)


def test_the_campaign_form_warns_of_thousands_of_evaluations_with_its_estimate(client, engineer, problem):  # noqa: F811
    client.force_login(engineer)
    html = client.get("/campaigns/new/").content.decode()
    scale = re.search(r'data-testid="campaign-scale".*?</div>', html, re.S).group(0)
    assert "large campaign" in scale and "2,041" in scale and "hours" in scale  # 1 + (1 + 6*14) * 12 * 2
    small = client.get("/campaigns/new/estimate/", {"problems": ["double"], "case": "mini", "iterations": 2,
                                                     "beam_width": 1, "plans_per_candidate": 2,
                                                     "samples_per_plan": 1, "backend": "simulator"})
    assert "large campaign" not in small.content.decode() and "Up to <strong>5</strong>" in small.content.decode()


def test_the_campaign_form_marks_what_cannot_run_here_and_explains_memory(client, engineer, problem, monkeypatch):  # noqa: F811
    monkeypatch.setattr("campaigns.forms.backend_unavailable",
                        lambda backend, platform: "no GPU here" if backend == "cuda" else None)
    client.force_login(engineer)
    html = client.get("/campaigns/new/").content.decode()
    assert re.search(r'<option value="cuda"[^>]*disabled[^>]*title="no GPU here"[^>]*>[^<]*\(unavailable here\)', html)
    memory = re.search(r'id="id_memory".*?<small class="help">(.*?)</small>', html, re.S).group(1)
    assert memory.startswith("Checked:") and "Unchecked:" in memory
