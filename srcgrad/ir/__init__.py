"""The IR: values, ops, graphs; a printer and a verifier."""
