"""End-to-end tests against a real tracing backend (Phoenix) and a second-language client (Node.js)."""
