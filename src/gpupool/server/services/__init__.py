"""Elastic inference services: replicas as jobs, health checks, endpoints, autoscaling."""
