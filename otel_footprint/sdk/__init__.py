"""In-process integration: the FootprintSpanProcessor, its setup helper and the annotating exporter."""
