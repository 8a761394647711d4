"""From an order to a launch: who the workload runs as, where, with which environment and
limits. The agent calls ``Launcher.prepare`` for each new order and ``Launcher.cleanup`` once
the workload has ended; errors are ``LaunchError`` with a reason the allocation fails with.

With ``tenant-users`` isolation a workload gets: its tenant's Unix user; a fresh working
directory ``WORK_DIR/alloc-N-xxxx`` owned by that user, mode 0700 (also its ``HOME`` and
``TMPDIR``; removed when the workload ends — outputs belong on shared storage); an
environment of its own (a system ``PATH``, the job's variables, the slice's), nothing of the
agent's; and a cgroup with its grant's CPU, host memory and a process limit. Its logs are
written by the shim into the agent's own state folder, which no workload can open.
"""

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Set
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpupool.agent import cgroups, checkpoint_stamp, no_userns
from gpupool.agent.container import (
    CONTAINER_ENV_FILE,
    client_env,
    container_argv,
    env_file,
    find_runtime,
)
from gpupool.agent.firewall import FirewallError
from gpupool.agent.identity import Identity, Isolation, IsolationError, TenantUsers, resolve
from gpupool.agent.job_output import OutputPlan, plan_for
from gpupool.agent.mps import MpsDaemons
from gpupool.agent.netns import NetnsError, TenantNetworks
from gpupool.agent.node import allocatable_memory_mib, disk_budget_mib, pid_budget
from gpupool.agent.processes import LaunchSpec
from gpupool.agent.replica_ports import CONTROL, DEFAULT_RANGE, NoPortError, ReplicaPorts
from gpupool.agent.sandbox import Sandbox
from gpupool.agent.slurm_env import install_tools, node_env
from gpupool.model import SpecError, notebook
from gpupool.model.labels import REPLICAS_LABEL
from gpupool.model.protocol import OrderOut
from gpupool.model.workload import check_workload
from gpupool.sharing.runtime_env import Grant, LocalDevice, slice_env

KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME", "PYTHONPATH")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_WORK_DIR = Path("/var/lib/gpupool/work")
DEFAULT_MPS_DIR = Path("/var/lib/gpupool/mps")


class LaunchError(Exception):
    """The order cannot be started here; the allocation fails with this reason."""


@dataclass
class IsolationConfig:
    mode: str = "auto"  # auto | tenant-users | none
    tenant_users: dict[str, str] = field(default_factory=dict)  # tenant -> Unix user
    user_prefix: str = "gp-"
    create_users: bool = True
    work_dir: Path | None = None  # default: /var/lib/gpupool/work, or STATE/work without root
    cgroups: bool = True
    cgroup_parent: str = "gpupool"
    pids_max: int = 4096
    container_runtime: str | None = None  # absolute path; default: found in system folders
    tenant_pids_max: int = 16384  # all of one tenant's workloads on this node together
    default_mem_mib: int | None = None  # per card, for grants without mem=; None: RAM / cards
    private_tmp: bool = True  # tenant-users: a private /tmp and /dev/shm per workload
    network: bool = True  # tenant-users: a network namespace per tenant
    disk_max_mib: int = 100 * 1024  # a workload's working folder; 0: unlimited
    replica_ports: tuple[int, int] = DEFAULT_RANGE  # service replicas' ports on this node


@dataclass
class Prepared:
    spec: LaunchSpec
    workdir: str
    cgroups: list[str]
    mps: list[str]  # GPU UUIDs whose MPS daemon this workload uses
    mem_mib: int  # the host-memory limit on this node (the grant, or the default)
    outputs: OutputPlan | None = None  # the job's --output / --error, written at its end
    port: int | None = None  # a service replica's port, chosen here
    disk_mib: int = 0  # its working folder's limit (0: none)
    control: str | None = None  # where the agent asks a replica for health, load, sleep


def describe(isolation: Isolation, hierarchy: cgroups.Hierarchy, mps: MpsDaemons) -> str:
    who = (
        "tenant-users (each tenant's workloads run as its own Unix user)"
        if isolation is Isolation.TENANT_USERS
        else f"none (workloads run as the agent's user, uid {os.geteuid()})"
    )
    userns = (
        "no user namespaces (seccomp)"
        if no_userns.available()
        else ("user namespaces allowed (pyseccomp or libseccomp missing)")
    )
    return f"isolation {who}; {hierarchy.describe()}; {mps.describe()}; {userns}"


def preview(mode: str = "auto") -> str:
    """What an agent started here with ``--isolation mode`` would run with (``gpupool
    devices``); raises ``SpecError`` where it would refuse to start."""
    isolation = resolve(mode, os.geteuid())
    return describe(isolation, cgroups.detect(), MpsDaemons(DEFAULT_MPS_DIR))


def private_work_root(path: Path, shared: bool) -> Path:
    """The folder that holds workloads' directories: the agent's own, 0711 when workloads of
    other users must reach their folder in it (they cannot list it), never a symlink."""
    path = Path(os.path.abspath(path))  # the shim starts workloads from another folder
    path.mkdir(parents=True, exist_ok=True)
    info = path.lstat()
    if path.is_symlink() or info.st_uid != os.geteuid():
        raise SpecError(f"work dir {path}: must be a folder owned by the agent's user")
    path.chmod(0o711 if shared else 0o700)
    return path


class Launcher:
    def __init__(
        self,
        node: str,
        state_dir: Path,
        config: IsolationConfig,
        local: dict[int, LocalDevice],
        hami_core: str | None,
        node_memory_mib: int | None = None,
    ):
        """``node_memory_mib``: the memory this node offers the pool (its registration)."""
        self.node = node
        self.node_mem = node_memory_mib or allocatable_memory_mib()
        self.pid_budget = pid_budget()
        self.local = local
        self.hami_core = hami_core
        self.config = config
        self.isolation = resolve(config.mode, os.geteuid())
        shared = self.isolation is Isolation.TENANT_USERS
        self.users = (
            TenantUsers(config.tenant_users, config.user_prefix, config.create_users)
            if shared
            else None
        )
        self.work_root = private_work_root(
            config.work_dir or (DEFAULT_WORK_DIR if shared else state_dir / "work"), shared
        )
        group = re.sub(r"[^A-Za-z0-9_.-]", "_", node)[:80]
        group += "-" + hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:8]
        hierarchy = (
            cgroups.detect(parent=config.cgroup_parent)
            if config.cgroups
            else cgroups.Hierarchy(None, {}, "turned off (--no-cgroups)")
        )
        if config.container_runtime and not os.path.isabs(config.container_runtime):
            raise SpecError(
                f"container runtime {config.container_runtime!r}: give an absolute path"
            )
        self.cgroups = cgroups.Cgroups(
            hierarchy, group, config.pids_max, tenant_pids_max=config.tenant_pids_max,
            node_mem_mib=self.node_mem, node_pids_max=self.pid_budget,
        )  # fmt: skip
        self.disk_budget = disk_budget_mib(self.work_root)
        self.ports = ReplicaPorts(group, config.replica_ports)
        self.networks = (
            TenantNetworks(group, ports=self.ports) if shared and config.network else None
        )
        self.mps = MpsDaemons(DEFAULT_MPS_DIR if shared else state_dir / "mps")

    def describe(self) -> str:
        """One line for logs and ``gpupool up``."""
        line = describe(self.isolation, self.cgroups.hierarchy, self.mps)
        if self.isolation is Isolation.TENANT_USERS:
            net = self.networks.describe() if self.networks else "network namespaces off"
            tmp = "private /tmp, /dev/shm, /var/tmp" if self.config.private_tmp else "shared /tmp"
            line += f"; {net}; {tmp}"
        return line

    def default_mem(self, cards: int) -> int:
        """The memory limit of a grant without ``mem=``: its cards' share of this host's RAM
        (``--default-mem`` MiB a card when set); a CPU-only job counts as one card."""
        per_card = self.config.default_mem_mib
        if per_card is None:
            per_card = self.node_mem // max(1, len(self.local))
        return per_card * max(1, cards)

    def shares(self, mem_mib: int) -> tuple[int, int]:
        """A workload's process and disk ceilings: its memory's share of the node's budgets
        (memory is promised once, so these are too), within ``--pids-max`` / ``--disk-max``
        and at least 64 processes and 256 MiB."""
        part = min(1.0, mem_mib / self.node_mem) if mem_mib > 0 else 1.0
        pids = min(self.config.pids_max, max(64, int(self.pid_budget * part)))
        disk = self.config.disk_max_mib
        if disk > 0 and self.disk_budget > 0:
            disk = min(disk, max(256, int(self.disk_budget * part)))
        return pids, disk

    def labels(self) -> dict[str, str]:
        version = self.cgroups.hierarchy.version
        return {
            "gpupool.io/isolation": self.isolation.value,
            "gpupool.io/cgroup": f"v{version}" if version else "none",
            REPLICAS_LABEL: self.replicas(),
        }

    def replicas(self) -> str:
        """Whether service replicas can run here: "yes", or "no: why" (the server refuses a
        service no node can run, with these words)."""
        if self.isolation is not Isolation.TENANT_USERS:
            return "yes"  # on the host's network, ports held by the agent
        if self.networks is None:
            return "no: the agent runs with --no-tenant-network"
        why = self.networks.not_walled()
        return f"no: {why}" if why else "yes"

    # -- one order ------------------------------------------------------------------------
    def identity(self, tenant: str) -> Identity | None:
        if self.users is None:
            return None
        try:
            return self.users.identity(tenant)
        except IsolationError as exc:
            raise LaunchError(str(exc)) from None

    def prepare(
        self,
        order: OrderOut,
        grants: list[Grant],
        lease: Path | None,
        fence_kill_s: float,
        folder: Path,
    ) -> Prepared:
        """Everything a launch needs, made on disk (working dir, cgroups, MPS daemon);
        ``folder`` is the workload's folder in the agent's state dir."""
        command, image = list(order.command), order.image
        if not command:
            raise LaunchError("job has no command to run")
        try:
            check_workload(command, order.env, image)
            slice_vars = slice_env(grants, self.local, self.hami_core)
        except SpecError as exc:
            raise LaunchError(f"cannot start: {exc}") from None
        runtime = (self.config.container_runtime or find_runtime()) if image else None
        if image and runtime is None:
            raise LaunchError(
                f"image {image}: neither docker nor podman is installed on {self.node}"
            )
        if runtime is not None and not os.access(runtime, os.X_OK):
            raise LaunchError(f"image {image}: container runtime {runtime} is not executable")
        who = self.identity(order.tenant)
        mine = [n for n in order.nodes if n.node == self.node]
        cpu = sum(n.cpu_millis for n in mine)
        mem = sum(n.mem_mib for n in mine)
        if mem <= 0 and self.cgroups.enabled:  # an older server: it reserved none
            mem = self.default_mem(sum(len(n.devices) for n in mine))
        pids, disk = self.shares(mem)
        workdir = self._workdir(order.id, who)
        made: list[str] = []
        files: dict[str, str] = {}
        port: int | None = None
        control: str | None = None
        try:
            made = (
                [str(p) for p in self.cgroups.create(order.id, cpu, mem, order.tenant, pids)]
                if not image
                else []
            )
            box, port, control = (
                (None, *self._host_ports(order)) if image else self._sandbox(order, workdir, mem)
            )
            mps = self._mps(slice_vars)
            job_env = {**order.env, **slice_vars, **mps.env, **gang_env(order, self.node)}
            if port is not None and control is not None:  # the agent's word, over the job's
                job_env |= {
                    "PORT": str(port),
                    "GPUPOOL_REPLICA_PORT": str(port),
                    "GPUPOOL_CONTROL_PORT": control.rsplit(":", 1)[1],
                }
            if image:
                assert runtime is not None
                env_path = str(folder.resolve() / CONTAINER_ENV_FILE)
                argv = container_argv(
                    runtime, order.id, image, command, env_path,
                    identity=who, cpu_millis=cpu, mem_mib=mem, pids_max=pids,
                    gpus=job_env.get("NVIDIA_VISIBLE_DEVICES"), publish=port,
                    control=int(control.rsplit(":", 1)[1]) if control else None,
                )  # fmt: skip
                files[CONTAINER_ENV_FILE] = env_file(job_env)
                # the client talks to its daemon as the agent: nothing of the job's reaches it
                uid = gid = None
                env = client_env()
            else:
                argv, uid, gid = command, who.uid if who else None, who.gid if who else None
                env = {**self._host_env(workdir, who), **job_env, **dir_env(order, workdir)}
                slurm = node_env(order, self.node, workdir, cpu)
                if slurm:  # gpupool sbatch: Slurm's variables, srun and scontrol
                    tools = install_tools(workdir, uid, gid)
                    env |= slurm | {"PATH": f"{tools}:{env.get('PATH') or SYSTEM_PATH}"}
            outputs = plan_for(order, self.node, uid, gid)  # a pattern that leads out: refused
        except (OSError, SpecError, NetnsError, NoPortError) as exc:
            self.cleanup(workdir, made, [], replica=order.id if port is not None else None)
            raise LaunchError(f"cannot start: {exc}") from None
        spec = LaunchSpec(
            command=argv,
            env=env,
            cwd=workdir,
            uid=uid,
            gid=gid,
            cgroups=made,
            lease=str(lease) if lease and order.on_lost != "keep-running" else None,
            fence_kill_s=fence_kill_s,
            files=files,
            sandbox=asdict(box) if box else None,
            chdir=None if image else order.chdir or order.submit_dir,
            chdir_required=bool(order.chdir) and not image,
        )
        return Prepared(spec, workdir, made, mps.gpus, mem, outputs, port, disk, control)

    def _sandbox(
        self, order: OrderOut, workdir: str, mem_mib: int
    ) -> tuple[Sandbox | None, int | None, str | None]:
        """Namespaces for a tenant-users workload (root) and a service replica's ports. A
        workload joins its tenant's network namespace unless its job spans nodes (its peers
        reach it on the node's own address); a replica too, its port published into it from
        the node's addresses, its control port not (the agent reaches it there as root).
        A private /tmp and /dev/shm of at most its memory limit."""
        if self.isolation is not Isolation.TENANT_USERS:
            return None, *self._host_ports(order)
        single_node = len({n.node for n in order.nodes}) == 1
        replica = order.replica  # the server's word, not the job's env
        netns, port, control = None, None, None
        if replica and self.networks is not None:
            netns, port, control = self.networks.publish(order.tenant, order.id)
        elif replica:
            raise NetnsError("a service replica needs its tenant's network namespace here "
                             "(the agent runs with --no-tenant-network)")  # fmt: skip
        elif self.networks is not None and self.networks.available and single_node:
            netns = self.networks.ensure(order.tenant)
        box = Sandbox(
            netns=netns, private_tmp=self.config.private_tmp, tmp_mib=mem_mib, keep=[workdir]
        )
        return box, port, control

    def _host_ports(self, order: OrderOut) -> tuple[int | None, str | None]:
        """A replica on the host's network (no tenant users, or an image job whose runtime
        publishes it): two ports nothing on the host uses, held for it alone; its control
        port answers on the host's loopback (an image's runtime publishes it there only)."""
        if not order.replica:
            return None, None
        port = self.ports.claim(order.id, None)
        return port, f"127.0.0.1:{self.ports.claim(order.id, None, CONTROL)}"

    def _workdir(self, alloc_id: int, who: Identity | None) -> str:
        path = tempfile.mkdtemp(prefix=f"alloc-{alloc_id}-", dir=self.work_root)
        if who is not None:
            os.chown(path, who.uid, who.gid)
        os.chmod(path, 0o700)
        return path

    def _host_env(self, workdir: str, who: Identity | None) -> dict[str, str]:
        """What a workload gets from the host: with tenant users only a system PATH, its own
        home and names; without, the agent's usual variables (the same user anyway)."""
        if self.isolation is Isolation.TENANT_USERS:
            env = {"PATH": SYSTEM_PATH, "HOME": workdir, "TMPDIR": workdir}
            if who is not None:
                env |= {"USER": who.user, "LOGNAME": who.user}
            return env | {"LANG": os.environ.get("LANG", "C.UTF-8")}
        return {k: os.environ[k] for k in KEEP_ENV if k in os.environ}

    def _mps(self, slice_vars: dict[str, str]) -> "_Mps":
        if "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in slice_vars:
            return _Mps({}, [])
        gpus = [u for u in slice_vars.get("CUDA_VISIBLE_DEVICES", "").split(",") if u]
        if not gpus:
            return _Mps({}, [])
        env = self.mps.ensure(gpus[0])  # one pipe directory per client: its first GPU's daemon
        return _Mps(env, [gpus[0]] if env else [])

    def cleanup(
        self,
        workdir: str,
        made: list[str],
        mps: list[str],
        in_use: Set[str] = frozenset(),
        replica: int | None = None,
    ) -> None:
        """After a workload ended: kill what is left in its cgroups, remove them and its
        working dir, stop MPS daemons no other workload uses, and put a replica's port
        (``replica``: its allocation) in quarantine."""
        try:
            if made:
                cgroups.kill(made)
                cgroups.remove(made)
                cgroups.remove_parents(made)  # its tenant's folder, once empty
            self.remove_workdir(workdir)
            for uuid in mps:
                if uuid not in in_use:
                    self.mps.stop(uuid)
        finally:  # last, and whatever failed above: the rules learn when its quarantine ends
            if replica is not None:
                self.ports.release(replica)
                self.refresh_ports(now=True)

    def remove_workdir(self, workdir: str) -> None:
        """A workload's own folder, never anything else (its parent is the work root)."""
        if workdir and Path(workdir).parent == self.work_root:
            shutil.rmtree(workdir, ignore_errors=True)

    def refresh_ports(self, now: bool = False) -> None:
        """The published ports again: ``now``, or once a quarantine ended (every round of
        the agent asks)."""
        if self.networks is not None:
            try:
                self.networks.refresh(when_due=not now)
            except FirewallError as exc:
                raise LaunchError(f"firewall: {exc}") from None

    def adopt_ports(self, live: Set[int]) -> None:
        """After a restart: ports of allocations that no longer run here go to quarantine."""
        self.ports.release_all_but(set(live))
        self.refresh_ports(now=True)


@dataclass
class _Mps:
    env: dict[str, str]
    gpus: list[str]


def dir_env(order: OrderOut, workdir: str) -> dict[str, str]:
    """Where the job came from and its own work folder (sbatch's SLURM_SUBMIT_DIR)."""
    env = {"GPUPOOL_WORK_DIR": workdir, **checkpoint_stamp.env(workdir)}
    if order.submit_dir:
        env["GPUPOOL_SUBMIT_DIR"] = order.submit_dir
    return env


def gang_env(order: OrderOut, node: str) -> dict[str, str]:
    members = [n.node for n in order.nodes]
    app = notebook.app_env(order.job_id) if order.interactive == notebook.KIND else {}
    return {
        **app,
        "GPUPOOL_GANG_SIZE": str(len(members)),
        "GPUPOOL_GANG_RANK": str(members.index(node)),
        "GPUPOOL_GANG_NODES": ",".join(members),
        "GPUPOOL_JOB_ID": str(order.job_id),
        "GPUPOOL_ALLOCATION_ID": str(order.id),
        "GPUPOOL_GENERATION": str(order.generation),
        "GPUPOOL_TENANT": order.tenant,
        "GPUPOOL_NODE": node,
    }
