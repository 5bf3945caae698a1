"""Reads of knowledge: the scope a route searches and hybrid retrieval over it. Nothing here writes."""
