"""The audit ledger: one hash-chained, append-only table every app records its milestones in.

``models`` (the :class:`AuditEvent` table), ``actor`` (who did it), ``ledger`` (append, seal and
verify; design in ``docs/audit.md``), ``metrics`` (the unsealed tail at scrape).
"""
