"""Placeholder: filled in by the assertion-engine work."""
