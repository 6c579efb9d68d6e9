"""Adapters: the trainer task as other frameworks' environments."""
