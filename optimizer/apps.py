from django.apps import AppConfig


class OptimizerConfig(AppConfig):
    name = "optimizer"
    default_auto_field = "django.db.models.BigAutoField"
