"""An agent with no config of its own."""
