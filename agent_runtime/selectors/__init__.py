"""Reads of the agent runtime: workspaces (routes and their gate), the tool catalog, runs.

Selectors never write. Each enforces visibility itself (a run of this session, a route this session
may use), so a caller never looks a row up by bare primary key.
"""
