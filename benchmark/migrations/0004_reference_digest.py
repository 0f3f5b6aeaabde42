"""Evaluations record what they were measured against (issue 20's upgrade hazard).

`load_suite` updates a problem's reference, parameters, tolerance and peak counts in place, while an
evaluation is cached on (kernel, platform, backend, backend_version): a result against the old reference
stayed ranked. Problems now keep a digest of those fields and evaluations the digest they ran against; a
result whose digest differs is stale (never ranked, run again when requested). Results stored before this
migration ran against an unknown reference, so they keep a blank digest: stale until evaluated again.
"""

import hashlib
import json

from django.db import migrations, models


def _digest(problem) -> str:
    # Frozen copy of benchmark.models.reference_digest as of this migration; Problem.save keeps it current.
    payload = json.dumps(
        {
            "reference": problem.reference_source, "parameters": problem.parameters, "tolerance": problem.tolerance,
            "counts": [problem.vector_flops, problem.matmul_flops, problem.hbm_bytes],
        },
        sort_keys=True, default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def digest_problems(apps, schema_editor):
    Problem = apps.get_model("benchmark", "Problem")
    for problem in Problem.objects.all():
        problem.reference_digest = _digest(problem)
        problem.save(update_fields=["reference_digest"])


class Migration(migrations.Migration):

    dependencies = [
        ("benchmark", "0003_evaluation_review"),
    ]

    operations = [
        migrations.AddField(
            model_name="problem",
            name="reference_digest",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name="evaluation",
            name="reference_digest",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.RunPython(digest_problems, migrations.RunPython.noop),
    ]
