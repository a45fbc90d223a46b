"""The session bus backends: how stream frames and control commands travel (see base.py)."""
