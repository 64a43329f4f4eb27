"""Managed accounts: several logins of one harness kept apart (contract only so far)."""
