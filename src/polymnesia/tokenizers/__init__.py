"""polymnesia.tokenizers."""
