"""A customer's own records (orders, invoices, entitlements) and signed file downloads."""
