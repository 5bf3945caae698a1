"""Console pages of the agent runtime: clients, consent, sessions, workspaces, providers, tools,
conversations."""
