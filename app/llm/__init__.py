"""Language models: token counting, chat-model providers and the responders built on them."""
