"""A throw-away single-node SLURM cluster for tests (Debian's slurmctld/slurmd/munge, no systemd).

``install()`` installs the packages with apt-get (root only); ``SlurmCluster(base)`` writes a
slurm.conf under ``base`` (state, spool, logs and PID files there too; in /etc only a link
/etc/slurm/slurm.conf -> that file, which srun inside jobs needs and ``stop()`` removes), starts
munged (unless one already answers), slurmctld and slurmd, and ``stop()`` ends exactly the daemons
it started, by their PID files, and deletes those files.  Clients find the cluster through
``SLURM_CONF`` (see :meth:`SlurmCluster.env`).

The node offers two fake GPUs (a count-only GRES: no device files, no autodetection) in
partition ``gpu`` next to the default partition ``cpu``, with the names of
``workflow/profiles/slurm/partitions.yaml``, so that a GPU request is routed and granted like on a
real cluster (torch in the job still sees no CUDA).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
DAEMONS = ["slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol", "sinfo"]
MUNGE_PID = Path("/run/munge/munged.pid")
#: fake GPUs of the node: two training jobs at once, as many as the node's CPUs on a small machine
GPUS = 2
#: where srun looks for its config inside a job: slurmstepd does not pass SLURM_CONF on
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")


class Unavailable(Exception):
    """SLURM cannot be installed or started here (the reason is the message)."""


def _run(cmd: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def install() -> None:
    """Install Debian's SLURM and munge packages unless present; raise
    :class:`Unavailable` if impossible."""
    if all(shutil.which(name) or Path("/usr/sbin", name).exists() for name in DAEMONS):
        return
    if os.geteuid() != 0:
        raise Unavailable("SLURM is not installed and installing it needs root (apt-get)")
    if not shutil.which("apt-get"):
        raise Unavailable("SLURM is not installed and there is no apt-get to install it")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    proc = _run(cmd, timeout=300, env=env)
    if proc.returncode != 0:  # an empty or stale package index: update once, then retry
        _run(["apt-get", "update", "-q"], timeout=300, env=env)
        proc = _run(cmd, timeout=300, env=env)
    if proc.returncode != 0:
        raise Unavailable(
            f"apt-get install {' '.join(PACKAGES)}"
            f" failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _munge_answers() -> bool:
    if not shutil.which("munge"):
        return False
    enc = _run(["munge", "-n"], timeout=10)
    return enc.returncode == 0 and _run(["unmunge"], input=enc.stdout, timeout=10).returncode == 0


def _stop_pidfile(pidfile: Path, timeout: float = 10) -> None:
    """SIGTERM the process named in ``pidfile``, wait for it to go, delete the file."""
    if not pidfile.exists():
        return
    try:
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, ValueError, IndexError):
        pass
    pidfile.unlink(missing_ok=True)


def _clean_stale() -> None:
    """Stop the daemons of an earlier test cluster whose test was killed before it could stop
    them (its link in /etc names a slurm.conf of ours: ClusterName=dplabtest), and drop the link."""
    if not SYSTEM_CONF.is_symlink():
        return
    target = Path(os.readlink(SYSTEM_CONF))
    text = target.read_text() if target.exists() else ""
    if target.exists() and "ClusterName=dplabtest" not in text:
        return
    for line in text.splitlines():
        if line.startswith(("SlurmdPidFile=", "SlurmctldPidFile=")):
            _stop_pidfile(Path(line.split("=", 1)[1]))
    SYSTEM_CONF.unlink()


class SlurmCluster:
    """A single-node cluster whose files all live under ``base``."""

    def __init__(self, base: Path):
        self.base = Path(base)
        self.conf = self.base / "slurm.conf"
        self.pidfiles: list[Path] = []
        self.linked = False

    def env(self) -> dict:
        return {"SLURM_CONF": str(self.conf)}

    def write_conf(self) -> None:
        host = socket.gethostname().split(".")[0]
        cpus = os.cpu_count() or 1
        mem_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.8)
        for sub in ("state", "spool"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        b = self.base
        self.conf.write_text(
            f"""ClusterName=dplabtest
SlurmctldHost={host}
SlurmUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool
SlurmctldPidFile={b}/slurmctld.pid
SlurmdPidFile={b}/slurmd.pid
SlurmctldLogFile={b}/slurmctld.log
SlurmdLogFile={b}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=300
SchedulerParameters=sched_interval=1
GresTypes=gpu
NodeName={host} CPUs={cpus} RealMemory={mem_mb} Gres=gpu:{GPUS} State=UNKNOWN
PartitionName=cpu Nodes={host} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={host} MaxTime=INFINITE State=UP
"""
        )
        # fake GPUs: granted by the scheduler like real ones, a null device
        # (as /dev/null) behind each
        for i in range(GPUS):
            os.mknod(self.base / f"fake_gpu{i}", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        (self.base / "gres.conf").write_text(
            f"AutoDetect=off\nNodeName={host} Name=gpu File={b}/fake_gpu[0-{GPUS - 1}]\n"
        )

    def start(self, timeout: float = 60) -> None:
        _clean_stale()
        if SYSTEM_CONF.exists() or SYSTEM_CONF.is_symlink():
            raise Unavailable(
                f"{SYSTEM_CONF} exists: this machine has a SLURM set-up of its own; not touching it"
            )
        self.write_conf()
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        SYSTEM_CONF.symlink_to(self.conf)
        self.linked = True
        if not _munge_answers():
            Path("/run/munge").mkdir(parents=True, exist_ok=True)
            shutil.chown("/run/munge", "munge", "munge")
            proc = _run(["runuser", "-u", "munge", "--", "/usr/sbin/munged", "--force"], timeout=30)
            if proc.returncode != 0:
                raise Unavailable(f"munged did not start: {proc.stderr}")
            self.pidfiles.append(MUNGE_PID)
        for daemon in ("slurmctld", "slurmd"):
            proc = _run([f"/usr/sbin/{daemon}", "-f", str(self.conf)], timeout=30, env=self._env())
            if proc.returncode != 0:
                raise Unavailable(f"{daemon} did not start: {proc.stderr}\n{self.log(daemon)}")
            self.pidfiles.append(self.base / f"{daemon}.pid")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = _run(["sinfo", "-h", "-o", "%t"], timeout=10, env=self._env()).stdout.split()
            if state and all(s == "idle" for s in state):
                return
            time.sleep(0.5)
        raise Unavailable(
            f"the node did not become idle: {state}\n{self.log('slurmctld')}\n{self.log('slurmd')}"
        )

    def _env(self) -> dict:
        return {**os.environ, **self.env()}

    def log(self, daemon: str) -> str:
        path = self.base / f"{daemon}.log"
        return path.read_text()[-3000:] if path.exists() else ""

    def stop(self) -> None:
        """Cancel this cluster's jobs, then stop the daemons it started (newest
        first) by their PID files."""
        if self.conf.exists() and shutil.which("scancel"):
            _run(["scancel", "--user", str(os.geteuid())], timeout=10, env=self._env())
        while self.pidfiles:
            _stop_pidfile(self.pidfiles.pop())
        if self.linked:
            SYSTEM_CONF.unlink(missing_ok=True)
            self.linked = False
