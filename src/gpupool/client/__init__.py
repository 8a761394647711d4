"""A small HTTP client for the gpupool API, used by the CLI, the agent and the benchmarks."""

from gpupool.client.http import (
    ApiClient,
    ClientError,
    load_credentials,
    save_credentials,
    wait_until_healthy,
)

__all__ = ["ApiClient", "ClientError", "load_credentials", "save_credentials", "wait_until_healthy"]
