"""Services of the operators' app: approval decisions and the reconciliation of unknown outcomes."""
