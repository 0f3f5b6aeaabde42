"""The campaign's budgets take the optimizer's names (engine.search.budget.BUDGET_FIELDS)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("campaigns", "0001_initial"),
    ]

    operations = [
        migrations.RenameField(model_name="campaign", old_name="max_dollars", new_name="max_cost_usd"),
        migrations.RenameField(model_name="campaign", old_name="max_wall_s", new_name="max_wall_time_s"),
        migrations.AlterField(
            model_name="campaign",
            name="max_cost_usd",
            field=models.FloatField(blank=True, help_text="Most LLM dollars, all runs together.", null=True),
        ),
        migrations.AlterField(
            model_name="campaign",
            name="max_wall_time_s",
            field=models.FloatField(blank=True, help_text="Most seconds from launch to the end.", null=True),
        ),
    ]
