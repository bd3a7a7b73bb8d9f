"""The shop's legal pages: ``documents`` (publishing versions, the published pages,
the terms a checkout must have accepted)."""
