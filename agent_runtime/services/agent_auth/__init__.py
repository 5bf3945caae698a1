"""Agent Auth v1: browser authorization with PKCE, one-time codes, sessions and refresh rotation.

The flow (docs/protocol.md "Agent sign-in and consent"): a local agent creates an authorization, a
consent page (the business system's, or the hub's own for hub-consent clients) approves or denies it,
the agent exchanges the one-time code with its PKCE verifier for an access/refresh token pair, and
rotates the refresh token until the session's absolute lifetime ends. Every secret is stored only as
a SHA-256 digest.

Lock order, everywhere in this module: authorization row → session row → the session's refresh
tokens → audit chain (taken last by ``audit_record``). Errors that must leave a trace (an expired
authorization flipped to ``expired``, a session revoked after refresh-token replay) are raised only
after their transaction has committed, so the error response cannot roll the change back.

By concern: :mod:`.authorizations`, :mod:`.tokens`, :mod:`.sessions`.
"""
