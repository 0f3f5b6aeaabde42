"""Settings of the benchmark app: the evaluation executor and the sandbox limits per problem size.

Each value comes from a Django setting of the same name when one is defined (tests use the `settings`
fixture), otherwise from the environment (docs/operations.md lists the variables), otherwise from the
default here. Read through the functions, never at import time.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from accelopt_site.env import env_bool, env_int, env_json, env_str

MIB = 1024 * 1024
# A problem whose inputs and outputs move more than this many HBM bytes gets the large limits: the
# published NKIBench shapes (22 MiB to 1 GiB) simulate for minutes and need GiBs, the mini ones (under
# 3 MiB) for seconds. A suite states each case's bytes; a user's reference is measured when its problem is
# created; a size nobody knows gets the large limits (benchmark.services.evaluations.limits_for).
LARGE_PROBLEM_HBM_BYTES = 8 * MIB


def _setting(name: str, read_env: Any) -> Any:
    if hasattr(settings, name):
        return getattr(settings, name)
    return read_env()


def evaluation_workers() -> int:
    """Evaluations running at once in this process (each drives sandboxed child processes)."""
    return int(_setting("ACCELOPT_EVALUATION_WORKERS", lambda: env_int("ACCELOPT_EVALUATION_WORKERS", 2, minimum=1)))


def evaluations_inline() -> bool:
    """Run evaluations in the requesting thread instead of the executor (tests; never for a web server)."""
    return bool(_setting("ACCELOPT_EVALUATION_INLINE", lambda: env_bool("ACCELOPT_EVALUATION_INLINE", False)))


def timeout_seconds(large: bool) -> int:
    if large:
        return int(_setting("ACCELOPT_EVALUATION_FULL_TIMEOUT_S",
                            lambda: env_int("ACCELOPT_EVALUATION_FULL_TIMEOUT_S", 1800, minimum=1)))
    return int(_setting("ACCELOPT_EVALUATION_TIMEOUT_S", lambda: env_int("ACCELOPT_EVALUATION_TIMEOUT_S", 120, minimum=1)))


def memory_bytes(large: bool) -> int:
    if large:
        megabytes = _setting("ACCELOPT_EVALUATION_FULL_MEMORY_MB",
                             lambda: env_int("ACCELOPT_EVALUATION_FULL_MEMORY_MB", 12 * 1024, minimum=256))
    else:
        megabytes = _setting("ACCELOPT_EVALUATION_MEMORY_MB",
                             lambda: env_int("ACCELOPT_EVALUATION_MEMORY_MB", 4 * 1024, minimum=256))
    return int(megabytes) * MIB


def stale_after_seconds() -> int:
    """A pending evaluation this process is not running, older than this, is taken to be orphaned."""
    return int(_setting("ACCELOPT_EVALUATION_STALE_AFTER_S",
                        lambda: env_int("ACCELOPT_EVALUATION_STALE_AFTER_S", 2 * timeout_seconds(True) + 600, minimum=1)))


def ray_address() -> str:
    """The Ray cluster evaluations run on ("head-host:6379", or "auto" on a node of it); empty: this
    process's local executor (the embedded default, no Ray needed)."""
    return str(_setting("ACCELOPT_RAY_ADDRESS", lambda: env_str("ACCELOPT_RAY_ADDRESS", "")))


def ray_resources() -> dict[str, Any]:
    """What one evaluation reserves on a Ray node, per backend: `ResourceSpec`s from JSON over the defaults in
    engine.evaluator.ray_cluster, e.g. {"simulator": {"num_cpus": 1, "memory_mb": 2048}}."""
    from engine.evaluator.ray_cluster import parse_resources  # pure: Ray itself is not imported

    data = _setting("ACCELOPT_RAY_RESOURCES", lambda: env_json("ACCELOPT_RAY_RESOURCES", {}))
    try:
        return parse_resources(data)
    except ValueError as error:
        raise ImproperlyConfigured(f"ACCELOPT_RAY_RESOURCES: {error}") from None


def ray_max_retries() -> int:
    """Times an evaluation whose Ray worker or node died is tried again before it is an infrastructure error."""
    return int(_setting("ACCELOPT_RAY_MAX_RETRIES", lambda: env_int("ACCELOPT_RAY_MAX_RETRIES", 2, minimum=0)))


def background_baseline_cases() -> tuple[str, ...]:
    """Which cases' suite baselines a serving process evaluates in the background when it starts (mini first:
    seconds each, then full: minutes each), so a fresh install's leaderboard fills itself; "none" for none."""
    value = _setting("ACCELOPT_BACKGROUND_BASELINES", lambda: env_str("ACCELOPT_BACKGROUND_BASELINES", "mini,full"))
    cases = tuple(case.strip() for case in str(value).split(",") if case.strip())
    if cases in ((), ("none",)):
        return ()
    unknown = [case for case in cases if case not in ("mini", "full")]
    if unknown:
        raise ImproperlyConfigured(
            f"ACCELOPT_BACKGROUND_BASELINES must be one of mini, full, mini,full or none; got {value!r} "
            f"(unknown: {', '.join(unknown)})"
        )
    return cases
