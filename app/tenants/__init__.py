"""Tenants (organisations)."""
