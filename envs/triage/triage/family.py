ID = "triage"  # placeholder: the family is being written
