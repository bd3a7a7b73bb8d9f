"""Serve the real app in a separate process: ``python tests/fakes/app_server.py``.

Settings come as JSON in CMSSHOP_TEST_APP_SETTINGS. The process prints its loopback
port on the first line of stdout, then serves until it is terminated. Used by the
multi-process concurrency test (two servers on one database, as in production).
"""

from __future__ import annotations

import json
import os
import sys

from waitress.server import create_server

from cmsshop.config import configure


def main() -> None:
    settings = json.loads(os.environ["CMSSHOP_TEST_APP_SETTINGS"])
    app = configure(settings).make_wsgi_app()
    server = create_server(app, host="127.0.0.1", port=0, threads=8)
    sys.stdout.write(f"{server.effective_port}\n")
    sys.stdout.flush()
    server.run()


if __name__ == "__main__":
    main()
