"""Reads of the agent runtime: workspaces (routes and their gate), the tool catalog, runs, and what
the console pages show of clients, sessions, conversations and tool providers.

Selectors never write. The agent-facing ones enforce visibility themselves (a run of this session,
a route this session may use), so a caller never looks a row up by bare primary key. The console's
reads see every row: its views check the model permissions before they call them.
"""
