"""`nemo_gym.testing`: helpers NeMo Gym's servers call from their own tests."""
