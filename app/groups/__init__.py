"""Groups of a tenant's users, managed by its admins (issue 30, item 1; ADR 0078)."""
