"""Volcano plugins: one module each, with `NAME` and `new(arguments) -> Plugin`."""
