"""Offline engine environments: make a hash-checked wheelhouse where there is network, install it where there is none.

Every module here uses the standard library only: the installer runs under the target's bare
python (a GPU image with torch and nothing else), before any of our dependencies exist there.
"""
