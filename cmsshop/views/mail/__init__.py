"""The mail outbox in the admin console: JSON routes and pages."""
