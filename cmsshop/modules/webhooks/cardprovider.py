"""The cardprovider webhook plugin (placeholder until its issue lands)."""


def includeme(config) -> None:
    pass
