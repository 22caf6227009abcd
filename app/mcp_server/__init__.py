"""The MCP server at `/mcp`: Threadline's knowledge and sessions as tools (ADR 0038)."""
