ID = "ledger"  # placeholder: the family is being written
