"""The studio as tools for coding agents: an MCP server over the services (docs/agents.md).

Not named `mcp`: that is the SDK's own package, which this app imports.
"""
