"""Judge settings: ``schema`` (the frozen dataclasses, their limits, the judge label), ``models`` (defaults
per judge and backend, model families), ``layers`` (YAML < environment < metadata < panel member, coercion,
unknown names refused) and ``credentials`` (where keys live, refusals, the one hint table)."""
