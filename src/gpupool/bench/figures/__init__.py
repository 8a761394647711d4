"""``gpupool bench figures``: the deterministic figures the README and docs claim, recomputed
with the code that produced them and judged against ``baselines.json`` (a CI gate)."""
