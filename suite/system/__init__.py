"""Reads the host and the process (/proc, /sys, ioctl, nvidia-smi); starts no process group."""
