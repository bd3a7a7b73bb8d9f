"""The edge of the scoped API tokens: their admin API and console page."""
