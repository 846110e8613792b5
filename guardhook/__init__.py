"""guardhook: an admission webhook that makes the LeaderWorkerSet group the unit."""

__version__ = "0.1.0"
