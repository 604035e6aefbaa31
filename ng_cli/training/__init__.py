"""What a trainer drives: the weights of a running stack's engines (`WeightsClient`).

See docs/training.md for the three styles (disk checkpoints, tensor push, colocated) and a
worked on-policy loop.
"""

from ng_cli.training.client import WeightsClient

__all__ = ["WeightsClient"]
