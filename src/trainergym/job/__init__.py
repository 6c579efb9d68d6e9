"""A training job as it travels: the bundle an agent submits (`bundle`), the pinned
trainer stack it targets (`stack`), the GPUs it may ask for (`gpu`), and the typed result
every runner and backend reports (`result`).

Zone: shared by the library and the GPU host. Imports only `task` and `paths`.
"""
