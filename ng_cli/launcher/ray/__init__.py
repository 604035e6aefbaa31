"""Ray, only with a `ray` block: the block, the backend that places groups and starts actors, the actors.

config     RayConfig (the block; errors name `ray.<key>`), read without importing Ray
backend    RayBackend: the one module that imports Ray, and only when a stack has the block
child      RayChild: a process on Ray as the launcher sees it (a `process.Handle`)
actors     ProcessHost: the actor that owns one process on its node, with its watchdog
"""
