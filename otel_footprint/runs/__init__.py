"""From spans to runs: the neutral span view, recognition, grouping, Pass building and the engine."""
