"""Servers on loopback and their clients: the OpenAI test server, MCP, live APIs."""
