"""Console pages of the operators' app: audit history (the approvals inbox and traces land here)."""
