"""Real multilingual text: sources, the language table and aligned splits."""
