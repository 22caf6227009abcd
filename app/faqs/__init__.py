"""Tenant-curated FAQ entries: administered through /admin/faqs, matched by triage."""
