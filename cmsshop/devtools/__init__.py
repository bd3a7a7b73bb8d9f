"""Development-only helpers: never imported by what production runs."""
