"""``gpupool bench season``: the platform under a compressed trace and a fault schedule,
judged at the end by an independent checker over the workloads' own records
(docs/performance.md, "Season")."""
