"""Retention: per-tenant turn age limits and the scheduled sweep that enforces them."""
