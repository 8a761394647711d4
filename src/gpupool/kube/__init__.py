"""Kubernetes mode: gpupool as the GPU scheduler of an existing cluster.

Nodes and pods come from the API server (list + watch); the same pure engine
(``scheduler.cycle.run_cycle``) decides; decisions go back as Bindings, grant annotations,
pod deletions (preemption) and Events. Pure translation lives in ``inventory``, ``pods`` and
``grants``; I/O in ``api`` and ``watch``; the loop in ``scheduler``.
"""
