"""A notebook session (docs/interactive.md, "Notebooks"): a web app — JupyterLab, or any
given command — run as a job's workload in its sandbox, reached only through the server's
authenticated proxy at ``/api/v1/jobs/{id}/notebook/``, which the node's agent relays to the
app's loopback port inside the tenant's network namespace (never a port of the node).

The app learns where to listen and under which path it is served from its environment: the
port is a function of the job id (the agent connects there, whatever a person asks), so two
notebooks of one tenant (one network namespace) get different ports unless their ids are
10,000 apart; its range, 10000-19999, is below the one service replicas' ports are taken
from (20000-32767, ``agent.replica_ports``) and the kernel's ephemeral ports."""

PORT_ENV = "GPUPOOL_NOTEBOOK_PORT"
BASE_URL_ENV = "GPUPOOL_NOTEBOOK_BASE_URL"
FIRST_PORT, PORTS = 10_000, 10_000
KIND = "notebook"


def port_of(job_id: int) -> int:
    return FIRST_PORT + job_id % PORTS


def base_path(job_id: int) -> str:
    """The path the app is served under, with its trailing slash."""
    return f"/api/v1/jobs/{job_id}/notebook/"


def app_env(job_id: int) -> dict[str, str]:
    return {PORT_ENV: str(port_of(job_id)), BASE_URL_ENV: base_path(job_id)}


# the default app: JupyterLab where the job's environment has it; its own authentication
# off (the server's proxy authenticates, and only the tenant's namespace reaches the port)
JUPYTER = [
    "sh",
    "-c",
    'command -v jupyter >/dev/null 2>&1 || { echo "gpupool notebook: jupyter is not '
    'installed where the job runs; install jupyterlab or give the app to run after --" >&2; '
    "exit 127; }; "
    'exec jupyter lab --no-browser --ip=127.0.0.1 --port="$GPUPOOL_NOTEBOOK_PORT" '
    '--ServerApp.base_url="$GPUPOOL_NOTEBOOK_BASE_URL" --IdentityProvider.token= '
    "--ServerApp.password= --ServerApp.allow_remote_access=True",
]
