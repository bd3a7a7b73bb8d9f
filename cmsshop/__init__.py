"""cmsshop: a self-hosted shop for selling software."""

from cmsshop.config import configure
from cmsshop.db import configure_sqlite_for_threads


def main(global_config, **settings):
    """The paste app factory named in the ini files: first thing in a server process,
    before anything connects (see cmsshop.db.configure_sqlite_for_threads)."""
    configure_sqlite_for_threads()
    return configure(settings).make_wsgi_app()
