"""Checkout: what a buyer's order costs and how it reaches the payment provider.

- ``orders``: price an order from the database, commit it as pending, ask the provider
  for a checkout session; the per-customer pending-order limit
"""
