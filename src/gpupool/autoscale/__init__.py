"""Elastic inference services: reactive (Knative-KPA-like) and predictive autoscaling.

Pure logic, free of I/O: the policies decide desired replicas from observed load, the replay
measures them on a request-rate trace, the forecaster learns a service's daily curve.
"""
