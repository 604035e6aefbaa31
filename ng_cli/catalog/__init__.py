"""NeMo Gym's resources servers catalogued from their files (docs/compat.md's per-server table):
`facts` reads a folder, `classify` puts it in a category, `table` renders the rows and rewrites
the table between its markers. Used by scripts/nemo_gym_compat_table.py; nothing here imports
or runs NeMo Gym's code."""
