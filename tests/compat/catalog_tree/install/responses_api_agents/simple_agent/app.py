"""Stands for an agent's server (only its presence matters here)."""
