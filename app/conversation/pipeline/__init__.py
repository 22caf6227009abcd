"""The chat turn as one compiled LangGraph StateGraph (SPEC §1), and the runner that runs it."""
