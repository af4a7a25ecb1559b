"""Runs the documentation's examples: docstring Examples sections and marked README code blocks."""
