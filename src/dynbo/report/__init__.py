"""Tables and figures read from the result store."""
