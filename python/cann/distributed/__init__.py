"""`cann.distributed`: the seed's name for cann_dist (docs/python.md)."""
from cann_dist import *  # noqa: F401,F403
from cann_dist import BACKEND, ProcessGroupCDT  # noqa: F401
