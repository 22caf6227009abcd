"""Input guardrail, triage and output validation: the checks the chat graph's guard_input,
triage and validate_output nodes run. Pure functions over text, plus each tenant's policy."""
