"""What runs on a GPU host: the runner that trains and scores one job (`runner`), the scorer
(`scorer`), and the pod's HTTP service (`pod_service`).

Zone: the GPU host. Imports only `job`, `task` and `paths`: never env, probe or backends.
"""
