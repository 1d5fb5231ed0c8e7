"""Characterisation suite: the product. Each module mirrors one table of a seed paper."""
