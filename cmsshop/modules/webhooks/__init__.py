"""Shared webhook machinery; each provider is one small plugin module beside this file."""
