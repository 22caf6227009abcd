"""SQL of the privacy domain: erasure of a user's rows and the export's queries."""
