"""Agent Client Protocol: the ``acp`` capability's contract and clanker's own
client (``clanker coder``): transport, JSON-RPC, session state, the approval
ladder and the transcript. Nothing here is imported unless a coder runs."""
