"""Placeholder: filled in by the claim-level metrics work."""
