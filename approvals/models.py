"""The operators' app has no tables of its own yet: approval rows live with the other shared models in
``agent_runtime``, the audit ledger in the plumbing (``bailing.audit``)."""
