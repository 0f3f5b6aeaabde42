# Issue 34: trn3 (NeuronCore-v4) joins the platforms an evaluation can be for.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('benchmark', '0008_evaluation_queued'),
    ]

    operations = [
        migrations.AlterField(
            model_name='evaluation',
            name='platform',
            field=models.CharField(choices=[('trn1', 'trn1 (NeuronCore-v2)'), ('trn2', 'trn2 (NeuronCore-v3)'), ('trn3', 'trn3 (NeuronCore-v4)'), ('h100', 'h100 (NVIDIA H100 SXM)'), ('h200', 'h200 (NVIDIA H200 SXM)')], default='trn1', max_length=16),
        ),
    ]
