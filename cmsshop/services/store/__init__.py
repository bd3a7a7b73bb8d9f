"""The catalogue: what the shop sells.

- ``text``: slugs, storable text, search/filter input (shared with docs)
- ``listing``: the one searchable, paged listing of products and articles
- ``products``: products, their cards (prices, latest release) and content management
- ``currencies``: currencies, the default one, and money formatting
- ``releases``: release files (streamed upload, storage paths, display names)
- ``versions``: release versions compared by the product's scheme (PEP 440 or semver)
- ``media``: product images (checked, resized once, served by content hash) and the
  picture check the shop's logo shares
"""
