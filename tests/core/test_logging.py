"""The log handler of the inis (cmsshop.logs.BackgroundStreamHandler): every line is
written, in order, and a process that logs until its last moment exits cleanly."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

from helpers.app import ROOT

from cmsshop.logs import BackgroundStreamHandler, SafeFormatter


def test_every_record_is_written_in_order_and_close_writes_the_rest():
    stream = io.StringIO()
    handler = BackgroundStreamHandler(stream)
    handler.setFormatter(SafeFormatter("%(message)s"))
    logger = logging.getLogger("cmsshop.test_background_handler")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        for i in range(2000):
            logger.info("line %d with a token=%s", i, "secret-value")
    finally:
        logger.removeHandler(handler)
        handler.close()
    lines = stream.getvalue().splitlines()
    assert lines == [f"line {i} with a token=[redacted]" for i in range(2000)]
    assert not handler.thread.is_alive()


def test_a_process_logging_through_the_ini_exits_cleanly_with_every_line():
    script = (
        "import logging, logging.config\n"
        f"logging.config.fileConfig({os.path.join(ROOT, 'production.ini')!r})\n"
        "log = logging.getLogger('cmsshop.request')\n"
        "for i in range(500): log.info('request %d', i)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "[cmsshop.request]" in line]
    assert [line.rsplit(" ", 1)[1] for line in lines] == [str(i) for i in range(500)]
    assert "Fatal Python error" not in done.stderr


def test_a_forked_worker_writes_its_own_lines(tmp_path):
    """A pre-fork server's worker (forked after the handler started) inherits the queue
    but not the writer thread: it starts its own, so its lines are written, and the
    parent's (queued before the fork) are written once, by the parent."""
    path = tmp_path / "log.txt"
    script = f"""
import logging, os
from cmsshop.logs import BackgroundStreamHandler
handler = BackgroundStreamHandler(open({str(path)!r}, "a"))
log = logging.getLogger("cmsshop.forked")
log.addHandler(handler)
log.setLevel(logging.INFO)
log.propagate = False
log.info("parent before the fork")
child = os.fork()
if child == 0:
    log.info("child %d", os.getpid())
    handler.close()
    os._exit(0)
assert os.waitpid(child, 0)[1] == 0
log.info("parent after the fork")
handler.close()
print(child)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    child = done.stdout.split()[-1]
    lines = path.read_text().splitlines()
    assert sorted(lines) == sorted(
        ["parent before the fork", f"child {child}", "parent after the fork"]
    )
