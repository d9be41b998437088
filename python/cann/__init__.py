"""The seed's package name: `from cann.distributed import ...` is cann_dist (docs/python.md)."""
