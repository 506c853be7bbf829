"""What judging costs: the price table, token rules, the estimate before a run, the ledger
after it, and the dry run and budget checks."""
