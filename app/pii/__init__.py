"""Personal data as a library: finding and masking it in text, and the marks of erased users
that caches and buffers check. The data-rights feature (export, erasure) is `app.privacy`."""
