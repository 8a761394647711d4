"""Metering, price catalog, rental plans and invoices (money in fen, DESIGN.md invariant 2)."""
