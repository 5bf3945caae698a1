"""Console toolkit every app's pages use: access mixins, tables, forms helpers, error pages.

Ground floor: imports no app. The console shell (``bailing.shell.console``) composes the apps' pages.
"""
