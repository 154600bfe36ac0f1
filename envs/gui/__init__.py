"""GUI environments: tier 1, widgets in a browser page; tier 2, a desktop in a sandbox."""
