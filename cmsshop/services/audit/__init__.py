"""The audit log: every change recorded in the transaction that makes it (entries.py)."""
