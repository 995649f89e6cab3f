"""Providers: `base` is what a provider implements, `registry` finds the class for an id, and one
module per family (echo, openai_provider, litellm_provider, embedding, script) implements it."""
