"""The engine room: runtime adaptations that rely on framework internals, each module stating
what it relies on; tests/test_engine_pins.py pins every private name they use."""
