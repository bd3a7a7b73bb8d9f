"""Accounts at the edge: registration, login and the mailed links (JSON and pages), and
the admin console's customer pages."""
