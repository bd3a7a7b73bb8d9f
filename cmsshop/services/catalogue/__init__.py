"""The catalogue: products and their prices, currencies, and release files."""
