"""Where the application is assembled: the single-process service, the scale-out member,
the builder that picks one, and the hooks that compose features (progress, warnings,
model sink, demo, inspect)."""
