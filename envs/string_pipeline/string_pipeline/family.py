ID = "string_pipeline"  # placeholder: the family is being written
