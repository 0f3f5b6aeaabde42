"""HTML pages of the benchmark app, included at the site root by accelopt_site/urls.py."""

from __future__ import annotations

from django.urls import path

from benchmark import leaderboard_views, views

app_name = "benchmark"

urlpatterns = [
    path("leaderboard/", leaderboard_views.leaderboard, name="leaderboard"),
    path("leaderboard/baselines/", leaderboard_views.baseline_progress_fragment, name="baseline_progress"),
    path("problems/", views.problem_list, name="problems"),
    path("problems/<int:pk>/", views.problem_detail, name="problem_detail"),
    path("problems/<int:pk>/solution.json", views.problem_solution, name="problem_solution"),
    path("problems/import-flashinfer/", views.flashinfer_import, name="flashinfer_import"),
    path("kernels/", views.kernel_list, name="kernels"),
    path("kernels/upload/", views.kernel_upload, name="kernel_upload"),
    path("kernels/<int:pk>/", views.kernel_detail, name="kernel_detail"),
    path("kernels/<int:pk>/evaluate/", views.kernel_evaluate, name="kernel_evaluate"),
    path("kernels/<int:pk>/migrate/", views.kernel_migrate, name="kernel_migrate"),
    path("evaluations/<int:pk>/fragment/", views.evaluation_fragment, name="evaluation_fragment"),
    path("reviews/", views.review_list, name="reviews"),
    path("evaluations/<int:pk>/accept/", views.evaluation_review, {"decision": "accepted"}, name="evaluation_accept"),
    path("evaluations/<int:pk>/reject/", views.evaluation_review, {"decision": "rejected"}, name="evaluation_reject"),
]
