"""The audit log: every change recorded in the transaction that makes it (entries.py),
admin changes captured at the ORM level (capture.py), the log read and filtered (queries.py)."""
