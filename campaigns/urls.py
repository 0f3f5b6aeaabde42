"""HTML pages of campaigns, included at the site root by accelopt_site/urls.py."""

from __future__ import annotations

from django.urls import path

from campaigns import views

app_name = "campaigns"

urlpatterns = [
    path("campaigns/", views.campaign_list, name="list"),
    path("campaigns/new/", views.campaign_create, name="create"),
    path("campaigns/new/estimate/", views.campaign_estimate, name="estimate"),
    path("campaigns/compare/", views.campaign_compare, name="compare"),
    path("campaigns/<int:pk>/", views.campaign_detail, name="detail"),
    path("campaigns/<int:pk>/progress/", views.campaign_progress, name="progress"),
    path("campaigns/<int:pk>/cancel/", views.campaign_cancel, name="cancel"),
    path("campaigns/<int:pk>/export.<str:fmt>", views.campaign_export, name="export"),
]
