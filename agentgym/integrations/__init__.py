"""Adapters that let other training libraries (TRL) train on agentgym environments."""
