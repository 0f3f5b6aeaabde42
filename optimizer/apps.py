from django.apps import AppConfig


class OptimizerConfig(AppConfig):
    name = "optimizer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # benchmark shows who wrote a generated kernel through this hook: it must not import the optimizer.
        from benchmark import provenance
        from optimizer.provenance import RunProvenance

        provenance.register_generator(RunProvenance())
