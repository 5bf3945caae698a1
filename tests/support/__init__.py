"""Test helpers shared across apps (processes, fixtures that are not factories)."""
