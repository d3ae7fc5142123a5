"""Kernel-rate measurements for the step model (issue 23): one prepared script for a lent GPU."""
