"""The chat turn as one compiled LangGraph StateGraph (SPEC §1)."""
