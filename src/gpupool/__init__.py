"""gpupool: pool every accelerator of every server, cut it into slices, schedule and meter it."""

__version__ = "0.1.0"
