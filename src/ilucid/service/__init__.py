"""The live scheduler: reconcile loop, persistence, REST API, auth."""
