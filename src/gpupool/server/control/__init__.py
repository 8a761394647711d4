"""The control plane's duties and the runner that runs them while this process leads."""
