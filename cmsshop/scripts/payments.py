"""cmsshop-admin subcommands of the payments area (placeholder until that issue lands)."""


def register(subparsers) -> None:
    """Add this area's subcommands to the cmsshop-admin parser."""
