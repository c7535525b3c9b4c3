"""Ipopt option profiles shipped with powerdp (``*.opt`` files, one ``name value`` per line)."""
