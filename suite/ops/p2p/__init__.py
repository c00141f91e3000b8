"""Point-to-point workloads: the patterns of the p2p experiment and the link probes the doctor reuses
(pattern.py), and the isolated both-send-first pair of the exchange pattern (deadlock.py starts it, each of its two
processes runs deadlock_child.py)."""
