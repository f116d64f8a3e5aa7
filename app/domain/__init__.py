"""Pure domain logic: no I/O, no imports from the rest of app."""
