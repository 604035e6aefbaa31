"""A model folder without configs lists nothing."""
