"""Users as their tenant's admin manages them (above auth and audit: it records what it does)."""
