"""SQL of the privacy domain: erasure of a user's rows, the export's queries, and LangGraph's
checkpoint tables (pruned by erasure, retention and the orphan sweep)."""
