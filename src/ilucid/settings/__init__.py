"""Settings files an operator writes: tier settings (``--tiers``) and profile files
(a named list of plugins with their arguments). Read on top of the core alone."""
