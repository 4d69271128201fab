"""The Temporal worker entry point: wiring only, no logic of its own."""
