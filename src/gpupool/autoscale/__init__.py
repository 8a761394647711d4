"""Elastic inference services: reactive (Knative-KPA-like) and predictive autoscaling.

Pure logic, free of I/O: the policies decide desired replicas from observed load (``scaler``:
the live one, from replicas' readings), ``scale_plan`` which replicas a step adds, drains and
stops, the replay measures them on a request-rate trace, the forecaster learns a service's
daily curve. The server's service reconciler reads, calls these, and applies.
"""
