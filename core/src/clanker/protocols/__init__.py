"""Protocol helpers shared by providers (framing only: no harness semantics)."""
