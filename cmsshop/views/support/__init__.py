"""Support tickets at the edge: the customer's tickets (JSON and pages) and the admin queue."""
