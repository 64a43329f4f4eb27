"""The agent bridge: one loopback capability plane an agent calls on purpose (contract only)."""
