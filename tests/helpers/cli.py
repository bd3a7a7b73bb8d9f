"""Running cmsshop-admin as operators run it."""

from __future__ import annotations

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
