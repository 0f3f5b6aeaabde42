"""Problem.peak_counts_method: where a problem's peak counts came from (issue 20), shown with its peak: given
on the upload, or counted from the user's reference (bytes measured, FLOPs not counted). Blank for the suites."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('benchmark', '0005_triton_problems'),
    ]

    operations = [
        migrations.AddField(
            model_name='problem',
            name='peak_counts_method',
            field=models.CharField(blank=True, max_length=300),
        ),
    ]
