"""The topics of the suite, each a package over the core: rows (the papers' tables as data),
kernels (PTX bodies on the shared frame), analysis (pure maths), run (measurement through the
core). registry.py lists them."""
