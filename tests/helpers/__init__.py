"""Helpers shared by the test modules (scripted engines, tiny judges, run directories, CLI calls).

Test modules import from here, never from each other, so a test file can be moved or split
without breaking another.
"""
