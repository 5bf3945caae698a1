"""Console views (server-rendered HTML under /console/), one module per area."""
