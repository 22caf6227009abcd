"""Personal data: anonymisation, export and erasure."""
