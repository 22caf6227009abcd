"""Operational endpoints: liveness and readiness."""
