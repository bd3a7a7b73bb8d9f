"""The storefront's look: brand (shop name, accent colour, home page text, featured products).
seo: findability (canonical URLs, meta descriptions, robots.txt, the sitemap, JSON-LD)."""
