"""Superusers browse problems, kernels and evaluations in the Django admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmark import services


@pytest.mark.parametrize("model", ["problem", "kernel", "evaluation"])
def test_the_admin_lists_each_benchmark_model(client, make_user, fake_pipeline, silu_mini, model):
    services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    client.force_login(make_user("root", is_superuser=True, is_staff=True))
    response = client.get(reverse(f"admin:benchmark_{model}_changelist"))
    assert response.status_code == 200
    assert b"silu" in response.content
