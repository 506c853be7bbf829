"""Judging requests: the client (cache, limits and retries meet here), the reply cache, preflight
memory, the run's schedule, panels and the cascade as combinators over one request, and
the factory that turns settings into a judge."""
