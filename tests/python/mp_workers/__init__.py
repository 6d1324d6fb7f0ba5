"""Worker scripts and launch helpers for cairn's real multi-process Orbax tests."""
