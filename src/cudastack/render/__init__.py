"""Renderers of one report model: human (rich) and JSON. Only these and cli/ write output."""
