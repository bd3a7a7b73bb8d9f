"""Checkout: what a buyer's order costs and how it reaches the payment provider.

- ``orders``: price an order from the database, commit it as pending, ask the provider
  for a checkout session; the per-customer pending-order limit
- ``coupons``: whether a coupon applies, its discount per line, its redemptions counted
  race-free (reserved with the order, redeemed when paid, released when it lapses)
- ``coupons_admin``: coupons as an admin manages them: create, change, pause, list, usage
- ``expiry``: unpaid orders past ``cmsshop.checkout.order_ttl`` are cancelled by the worker
"""
