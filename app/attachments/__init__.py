"""Documents users upload into their conversations."""
