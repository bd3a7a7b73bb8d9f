"""The smoke suite's PostgreSQL databases: one per run, named after the machine and the
run's process, so that a run can drop what killed runs on the same machine left."""

from __future__ import annotations

import hashlib
import os
import re
import socket

SMOKE_PREFIX = "cmsshop_smoke_"


def host_tag() -> str:
    """This machine, in a database name: a run drops only what a run here left."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def drop_left_behind(connection) -> list[str]:
    """Drop the databases of runs on this machine whose process is gone (a run killed
    before its teardown leaves its database behind); a live run's is left alone."""
    pattern = re.compile(rf"{SMOKE_PREFIX}{host_tag()}_(\d+)_[0-9a-f]+")
    dropped = []
    names = connection.exec_driver_sql(
        f"SELECT datname FROM pg_database WHERE starts_with(datname, '{SMOKE_PREFIX}')"
    ).scalars()
    for name in list(names):
        found = pattern.fullmatch(name)
        if found is None or _alive(int(found.group(1))):
            continue
        connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        dropped.append(name)
    return dropped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
