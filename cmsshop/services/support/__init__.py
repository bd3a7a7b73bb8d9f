"""Support: tickets, and the support codes and records kept for server errors."""
