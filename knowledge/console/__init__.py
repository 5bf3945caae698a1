"""Console pages of knowledge: bases, documents, paste and upload, hit test."""
