"""Taxes and legal invoices: rates, the tax engine, VAT IDs, seller identity, billing details."""
