"""What judging costs: ``prices`` (the price table and its overrides), ``token_rules`` (prompt tokens of
text, images and videos), ``estimate`` (before a run), ``ledger`` (recorded usage, rows, tables) and
``budget`` (the dry run and budget checks)."""
