# Issue 36: a source identical to a private run's kernel gets a row of its own instead of that run's row, so
# the one unique key over (problem, sha256) gains the row's scope (blank for every row stored before).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('benchmark', '0009_platform_trn3'),
    ]

    operations = [
        migrations.AddField(
            model_name='kernel',
            name='scope',
            field=models.CharField(blank=True, default='', max_length=40),
        ),
        migrations.RemoveConstraint(
            model_name='kernel',
            name='benchmark_kernel_unique_source',
        ),
        migrations.AddConstraint(
            model_name='kernel',
            constraint=models.UniqueConstraint(fields=('problem', 'sha256', 'scope'), name='benchmark_kernel_unique_source_scope'),
        ),
    ]
