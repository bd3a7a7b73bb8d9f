"""Documentation at the edge: published articles (JSON and pages) and the admin editor."""
