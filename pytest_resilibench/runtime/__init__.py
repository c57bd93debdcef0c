"""Running episodes: the model protocol, parsing, environments, the turn loop, agents."""
