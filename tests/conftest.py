import os

from hypothesis import HealthCheck, settings

# Bounded by default so the suite stays fast; HYPOTHESIS_PROFILE=deep runs many more examples.
settings.register_profile(
    "bounded", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "deep", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "bounded"))
