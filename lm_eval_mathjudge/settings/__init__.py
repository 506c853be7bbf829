"""Judge settings: ``schema`` (the settings table, the frozen dataclasses derived from it, the judge label),
``kinds`` (a row of the table, and how each kind of value is read, checked and described), ``models`` (defaults
per judge and backend, model families), ``layers`` (YAML < environment < metadata < panel member, coercion,
unknown names refused) and ``credentials`` (where keys live, refusals, the one hint table)."""
