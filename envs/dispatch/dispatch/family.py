ID = "dispatch"  # placeholder: the family is being written
