"""Helpers every edge package uses: strict JSON types and reading, paging, forms, the
JSON bodies two features share, answer caching and schema building blocks."""
