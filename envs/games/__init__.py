"""Grid games: FrozenLake and Sokoban."""
