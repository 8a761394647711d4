"""Test support: a throwaway PostgreSQL server and a live gpupool server on loopback."""
