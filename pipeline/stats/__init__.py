"""stats stage."""
