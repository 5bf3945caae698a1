"""The project shell (top floor): root URLconf, the console shell, project-wide wiring.

It may import every app; nothing below it imports it.
"""
