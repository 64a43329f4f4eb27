"""Agent Client Protocol: starting a harness as an ACP server (contract only so far)."""
