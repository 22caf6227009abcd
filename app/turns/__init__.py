"""Turns: the shared turn types, the turn repository and the history store."""
