"""Volcano actions: one module each, with `NAME` and an Action class."""
