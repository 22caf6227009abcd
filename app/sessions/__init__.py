"""Chat sessions (conversations) and the listing of their turns."""
