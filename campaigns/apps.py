from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "campaigns"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The optimizer tells listeners about every run event it publishes; campaigns schedule their next runs
        # and refresh their pages from it. The optimizer never imports campaigns (docs/architecture.md).
        from campaigns.scheduler import on_run_events
        from campaigns.services import campaign_link_for_run
        from optimizer.events import register_event_listener
        from optimizer.run_links import register_run_link

        register_event_listener(on_run_events)
        # A run's page links to its campaign through a lookup registered here, for the same reason.
        register_run_link(campaign_link_for_run)
