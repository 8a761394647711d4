"""Loaders for real GPU cluster traces."""
