"""The conversation's use cases: a chat turn (claim, admission, run, replay) and sessions."""
