"""The licensing module (placeholder until its issue lands): routes under its prefixes."""


def includeme(config) -> None:
    pass
