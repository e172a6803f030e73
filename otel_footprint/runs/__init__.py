"""From spans to runs: the neutral span view, recognition, grouping into runs and Pass building."""
