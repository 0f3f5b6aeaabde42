"""Bringing the scale-out topology up on one machine (deploy/local.py); docs/operations.md has the recipe."""
