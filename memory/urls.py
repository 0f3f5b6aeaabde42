"""HTML pages of the memory app, included at the site root by accelopt_site/urls.py."""

from __future__ import annotations

from django.urls import path

from memory import merge_views, views

app_name = "memory"

urlpatterns = [
    path("memory/", views.entry_list, name="entries"),
    path("memory/export/", views.export_view, name="export"),
    path("memory/import/", views.import_view, name="import"),
    path("memory/prune/", views.bulk_prune, name="bulk_prune"),
    path("memory/merges/<int:pk>/undo/", merge_views.unmerge, name="unmerge"),
    path("memory/proposals/<int:pk>/<str:decision>/", merge_views.decide_proposal, name="proposal"),
    path("memory/<int:pk>/", views.entry_detail, name="entry"),
    path("memory/<int:pk>/edit/", views.entry_edit, name="entry_edit"),
    path("memory/<int:pk>/revert/<int:number>/", views.entry_revert, name="entry_revert"),
    path("memory/<int:pk>/<str:action>/", views.entry_action, name="entry_action"),
]
