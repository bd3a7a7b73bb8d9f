"""Payment providers: the provider-neutral interface (base) and one module per provider."""
