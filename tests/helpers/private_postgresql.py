"""A PostgreSQL cluster of the test's own (initdb into a temporary folder), for tests that
do to the server what no shared server may suffer: freeze it with SIGSTOP, stop it.

The tests run as root and PostgreSQL refuses to run as root, so when we are root the
cluster runs as the ``postgres`` user (``runuser``) in a folder it owns; a test that
cannot have one is skipped, with the reason.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest
from fakes.smtp import free_port


class PrivateCluster:
    def __init__(self, folder: str, port: int, as_user: list[str]):
        self.folder, self.port, self.as_user = folder, port, as_user
        self.data = os.path.join(folder, "data")
        self.frozen: list[int] = []

    def url(self, database: str = "cmsshop") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def run(self, *argv: str) -> None:
        subprocess.run([*self.as_user, *argv], check=True, capture_output=True, timeout=60)

    def pids(self) -> list[int]:
        """The postmaster (first line of postmaster.pid), then its children (/proc)."""
        with open(os.path.join(self.data, "postmaster.pid")) as file:
            postmaster = int(file.readline())
        children = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(stat) as file:
                    # pid (comm) state ppid ...: comm may hold spaces, so split after ")".
                    fields = file.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster:
                    children.append(int(stat.split("/")[2]))
        return [postmaster, *children]

    def freeze(self) -> None:
        """SIGSTOP the postmaster first (it forks no new backend after), then the rest:
        the kernel still accepts connections and acknowledges bytes, nobody answers."""
        for pid in self.pids():
            os.kill(pid, signal.SIGSTOP)
            self.frozen.append(pid)

    def thaw(self) -> None:
        for pid in reversed(self.frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.frozen = []


def _postgresql_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if not found and shutil.which("initdb"):
        found = [shutil.which("initdb")]
    if not found:
        pytest.skip("no initdb: PostgreSQL's server binaries are not installed")
    return os.path.dirname(found[-1])


def _version(path: str) -> tuple[int, ...]:
    part = path.split("/")[-3]
    return tuple(int(n) for n in part.split(".") if n.isdigit())


@contextlib.contextmanager
def private_cluster(database: str = "cmsshop") -> Iterator[PrivateCluster]:
    """A running cluster on a free loopback port with an empty ``database``; trust
    authentication for the ``postgres`` user; removed afterwards."""
    bindir = _postgresql_bin()
    as_user: list[str] = []
    folder = tempfile.mkdtemp(prefix="cmsshop-pg-")
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder)
            pytest.skip("running as root and there is no postgres user to run PostgreSQL as")
        runuser = shutil.which("runuser")
        if runuser is None:
            shutil.rmtree(folder)
            pytest.skip("running as root and runuser is missing: cannot run PostgreSQL")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        as_user = [runuser, "-u", "postgres", "--"]
    cluster = PrivateCluster(folder, free_port(), as_user)
    started = False
    try:
        cluster.run(
            f"{bindir}/initdb", "-D", cluster.data, "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--no-sync", "--no-instructions",
        )  # fmt: skip
        options = (
            f"-p {cluster.port} -k {folder} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        cluster.run(
            f"{bindir}/pg_ctl", "-D", cluster.data, "-o", options,
            "-l", os.path.join(folder, "log"), "-w", "-t", "30", "start",
        )  # fmt: skip
        started = True
        cluster.run(
            f"{bindir}/psql", "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "postgres",
            "-d", "postgres", "-c", f"CREATE DATABASE {database}",
        )  # fmt: skip
        yield cluster
    except subprocess.CalledProcessError as exc:
        if not started:
            pytest.skip(f"cannot start a private PostgreSQL: {exc.stderr.decode()[-300:]}")
        raise
    finally:
        cluster.thaw()
        if started:
            with contextlib.suppress(Exception):
                cluster.run(f"{bindir}/pg_ctl", "-D", cluster.data, "-m", "immediate", "stop")
        time.sleep(0.1)
        shutil.rmtree(folder, ignore_errors=True)
