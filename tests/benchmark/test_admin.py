"""Admins browse problems, kernels and evaluations in the Django admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmark import services


@pytest.mark.parametrize("model", ["problem", "kernel", "evaluation"])
def test_the_admin_lists_each_benchmark_model(client, site_admin, fake_pipeline, silu_mini, model):
    services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    site_admin.is_staff = True
    site_admin.save()
    client.force_login(site_admin)
    response = client.get(reverse(f"admin:benchmark_{model}_changelist"))
    assert response.status_code == 200
    assert b"silu" in response.content
