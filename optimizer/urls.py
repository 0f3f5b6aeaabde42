"""HTML pages of the optimizer app, included at the site root by accelopt_site/urls.py."""

from __future__ import annotations

from django.urls import path

from optimizer import transcript_views, views

app_name = "optimizer"

urlpatterns = [
    path("runs/", views.run_list, name="runs"),
    path("runs/new/", views.run_create, name="run_create"),
    path("runs/new/estimate/", views.run_estimate, name="run_estimate"),
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/state/", views.run_state, name="run_state"),
    path("runs/<int:pk>/chart/", views.run_chart, name="run_chart"),
    path("runs/<int:pk>/badge/", views.run_badge, name="run_badge"),
    path("runs/<int:pk>/iterations/<int:index>/", views.iteration_fragment, name="iteration"),
    path("runs/<int:pk>/tree/", views.run_tree, name="run_tree"),
    path("runs/<int:pk>/tree/<str:key>/", views.tree_node, name="tree_node"),
    path("runs/<int:pk>/memory/", views.run_memory, name="run_memory"),
    path("runs/<int:pk>/queue/", views.run_queue, name="run_queue"),
    path("runs/<int:pk>/continue/", views.run_continue, name="run_continue"),
    path("runs/<int:pk>/<str:action>/", views.run_action, name="run_action"),
    path("runs/<int:pk>/candidates/<str:key>/", views.candidate_detail, name="candidate_detail"),
    path("runs/<int:pk>/kernels/<int:kernel_pk>/diff/", views.kernel_diff, name="kernel_diff"),
    path("runs/<int:pk>/kernels/<int:kernel_pk>/transcript/", transcript_views.transcript, name="transcript"),
    path("leaderboard/grid/", transcript_views.grid, name="leaderboard_grid"),
]
