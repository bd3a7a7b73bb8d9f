"""The customer's subscriptions: JSON (``api``) and the account page (``pages``)."""
