"""The storefront's look: brand (shop name, accent colour, home page text, featured products)."""
