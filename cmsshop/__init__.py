"""cmsshop: a self-hosted shop for selling software."""

from cmsshop.config import configure


def main(global_config, **settings):
    """The paste app factory named in the ini files."""
    return configure(settings).make_wsgi_app()
