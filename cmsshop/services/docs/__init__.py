"""Documentation: ``articles`` (listing and content management) and ``markdown`` (the
CommonMark renderer and HTML sanitiser products and articles share)."""
