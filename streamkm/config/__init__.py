"""The service's configuration: the TOML schema, its flat view, the diff against a
checkpoint, and the preflight checks."""
