#!/usr/bin/env bash
# The mixture showcase: build the tiny model, warm-start it with SFT on oracle demonstrations of FrozenLake,
# Sokoban and Calculator (easy), then train it with async RL on the three at once and report held-out success
# per environment before and after. Arguments are overrides of the RL stage (e.g. trainer.steps=20).
SHOWCASE=mixture exec bash "$(dirname "$0")/quickstart.sh" "$@"
