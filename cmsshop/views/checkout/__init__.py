"""Checkout at the edge: the JSON routes, the buy form's target, the development sandbox
and the provider's return pages."""
