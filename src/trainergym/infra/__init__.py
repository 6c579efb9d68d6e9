"""Durable state and paid resources: the SQLite store (`store`), the job queue (`queue`), the
warm-pod pool (`pool`) and its provider (`runpod_graphql`), the cost ledger (`costs`).

Zone: the dispatcher. Never imports backends, env, probe, agents or adapters.
"""
