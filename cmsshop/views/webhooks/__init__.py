"""Outgoing webhook endpoints: the admin API and the console."""
