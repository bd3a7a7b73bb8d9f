"""Documentation articles and the Markdown renderer (CommonMark + an HTML sanitiser)."""
