"""Where commands write: every output checked against every input first, whole files written atomically.

`guard.check_outputs` is the one check every command runs before its first write (and before it
starts a server); `atomic.write_atomically` is the one way a whole file is written. It sits
beside `errors` at the bottom of the dependency graph, so any layer can write through it.
"""

from __future__ import annotations

from ng_cli.outputs.atomic import StagedFile, write_atomically, write_bytes_atomically
from ng_cli.outputs.guard import Input, Output, check_outputs, reads, same_file, writes

__all__ = [
    "Input",
    "Output",
    "StagedFile",
    "check_outputs",
    "reads",
    "same_file",
    "write_atomically",
    "write_bytes_atomically",
    "writes",
]
