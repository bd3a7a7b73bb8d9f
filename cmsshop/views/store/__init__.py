"""The store at the edge: the public catalogue (JSON and pages) and its admin side
(products, releases, currencies)."""
