"""Knowledge bases, documents and chunks arrive with the knowledge issue."""
