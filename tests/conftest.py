"""Hypothesis profiles: `dev` (default, quick) and `ci` (`pytest --hypothesis-profile ci`)."""

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=200, deadline=None)
# The model-based property runs 10,000 examples in CI; tests that are costly per example
# (Spark, fuzzing whole files) cap themselves with their own @settings.
settings.register_profile(
    "ci",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile("dev")
