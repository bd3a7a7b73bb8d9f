"""Running cmsshop-admin as operators run it: a command to its end, or a service started."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.app import ROOT


def run_admin(ini, *args, stdin: str | None = None):
    return subprocess.run(
        [sys.executable, "-m", "cmsshop.scripts.admin", ini, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def start_admin(ini: str, *args: str) -> subprocess.Popen:
    """cmsshop-admin started in the background (a worker, a sender), as a service runs it."""
    return subprocess.Popen(
        [sys.executable, "-m", "cmsshop.scripts.admin", ini, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
