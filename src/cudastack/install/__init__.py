"""Guarded installs: resolve first, show what would change, refuse what breaks protected parts."""
