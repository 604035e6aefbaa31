"""NeMo Gym's servers, run unchanged on our server framework.

A NeMo Gym resources server's `app.py` imports `nemo_gym.base_resources_server`,
`nemo_gym.server_utils`, `nemo_gym.openai_utils`, ... . `finder` gives those import names our
stand-ins (`api/`, one module per NeMo Gym module) while such an app is loaded, and only when no
real `nemo_gym` is installed; `adapter` turns the app's `SimpleResourcesServer` subclass into one of
our `ResourcesServer`s, so ng_run, ng_test and the collector treat it as any other environment.
"""
