ID = "multi_hop"  # placeholder: the family is being written
