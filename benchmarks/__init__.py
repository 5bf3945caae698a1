"""The benchmarks: commands that print figures (``bailing_bench``, ``bailing_bench_calls``,
``bailing_bench_audit``), the harness they share (``harness.py``) and the bare baseline endpoint
(``views.py``, mounted only under ``BAILING_BENCH_ENDPOINTS``). A tool on top of the hub: it uses the
apps' public surfaces, and no app imports it."""
