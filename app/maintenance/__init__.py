"""Leader-only services (and the periodic-service base the planner shares)."""
