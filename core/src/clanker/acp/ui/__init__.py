"""The coder's full-screen interface (imported only when it starts)."""
