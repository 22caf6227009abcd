"""A turn's shapes: the stored and checkpointed types, the `done` event, the /chat schemas."""
