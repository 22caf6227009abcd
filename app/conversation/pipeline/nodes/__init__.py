"""One module per pipeline stage. Each node reads declared fields of the state and returns
only what it changed."""
