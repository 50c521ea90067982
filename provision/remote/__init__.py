"""Controller-side handles onto host-side code (the agent)."""
